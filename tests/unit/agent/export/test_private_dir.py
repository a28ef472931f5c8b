"""The spool and the local start files live in owner-only directories; a directory owned by another user is refused
with one warning. Runs as root here (the e2e box), so another user's directory is simulated with chown to nobody."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import private_dir, spool
from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture
def tmpdir_(tmp_path, monkeypatch):
    """tempfile.gettempdir() is tmp_path/tmp (the spool root's parent); the spool's warn-once state is fresh."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setattr(spool, "_warned", [])
    return d


def _spans(n: int = 1):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t = provider.get_tracer("t")
    for i in range(n):
        t.start_span(f"phase {i}", attributes={sc.PHASE: "imports"}).end()
    return exporter.get_finished_spans()


def test_every_level_created_is_owner_only(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    assert private_dir.prepare(str(target)) is None
    for level in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert mode(level) == 0o700, (level, oct(mode(level)))


def test_the_spool_root_is_created_owner_only(tmpdir_):
    assert spool.write("ab" * 16, "worker-1", _spans())
    assert mode(spool.root()) == 0o700 and mode(spool.directory("ab" * 16)) == 0o700
    assert [s.name for s in spool.read("ab" * 16)] == ["phase 0"]


@as_root
def test_a_spool_root_owned_by_another_user_is_refused_with_one_warning(tmpdir_, caplog):
    """Another user created the root first (before: we wrote into it and read whatever it held)."""
    root = spool.root()
    os.mkdir(root, 0o777)
    os.chown(root, NOBODY, NOBODY)
    planted = os.path.join(root, "cd" * 16)
    os.mkdir(planted)
    (open(os.path.join(planted, "worker-9.json"), "w")).write('{"resourceSpans": []}')  # noqa: SIM115
    os.chown(planted, NOBODY, NOBODY)
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        assert spool.write("ab" * 16, "worker-1", _spans()) is False
        assert spool.read("cd" * 16) == []
        spool.prune(now=time.time() + 10 * spool.MAX_AGE_S)  # nothing of theirs is touched either
        spool.remove("cd" * 16)
        assert spool.write("ab" * 16, "worker-2", _spans()) is False
    assert os.listdir(root) == ["cd" * 16] and os.path.exists(os.path.join(planted, "worker-9.json"))
    [line] = warnings(caplog)  # one line, once per process
    assert "\n" not in line
    assert f"not using the spool {root}: it belongs to uid {NOBODY}, not to this user (uid 0)" in line
    assert "TMPDIR" in line


def test_a_spool_root_of_ours_open_to_others_is_made_owner_only(tmpdir_, caplog):
    """Earlier versions created the root 0755 (makedirs' default for a parent): it is tightened, and used."""
    root = spool.root()
    os.mkdir(root)
    os.chmod(root, 0o777)
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        assert spool.write("ab" * 16, "worker-1", _spans())
    assert mode(root) == 0o700 and not warnings(caplog)


def test_a_spool_root_that_is_a_symbolic_link_is_refused(tmpdir_, tmp_path, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, spool.root())
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        assert spool.write("ab" * 16, "worker-1", _spans()) is False
    assert not list(elsewhere.iterdir())
    [line] = warnings(caplog)
    assert "it is a symbolic link" in line


def test_the_start_directory_is_created_owner_only(tmp_path):
    target = tmp_path / "cache" / "vllm-otel-startup" / "starts"
    exporter = StartupFileExporter(str(target))
    assert exporter.export(_spans()).name == "SUCCESS"
    assert mode(tmp_path / "cache") == mode(target.parent) == mode(target) == 0o700
    [f] = target.iterdir()
    assert mode(f) == 0o600


@as_root
def test_a_start_directory_owned_by_another_user_is_refused_with_one_warning(tmp_path, caplog):
    target = tmp_path / "starts"
    target.mkdir(mode=0o777)
    os.chown(target, NOBODY, NOBODY)
    exporter = StartupFileExporter(str(target))
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        assert exporter.export(_spans()).name == "FAILURE"
        assert exporter.export(_spans()).name == "FAILURE"
    assert not list(target.iterdir())
    [line] = warnings(caplog)
    assert "\n" not in line
    assert f"cannot write startup trace to {target} (it belongs to uid {NOBODY}, not to this user (uid 0)" in line
    assert "OTEL_PYTHON_VLLM_STARTUP_DIR" in line


def test_a_start_directory_of_ours_keeps_the_mode_its_user_gave_it(tmp_path, caplog):
    """A directory the user chose (e.g. one a sidecar lists) keeps its mode; the files in it are 0600."""
    target = tmp_path / "starts"
    target.mkdir()
    os.chmod(target, 0o750)
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        assert StartupFileExporter(str(target)).export(_spans()).name == "SUCCESS"
    assert mode(target) == 0o750 and not warnings(caplog)
    assert [mode(f) for f in target.iterdir()] == [0o600]


def test_the_start_directory_is_checked_once_and_made_again_if_it_goes_away(tmp_path):
    target = tmp_path / "starts"
    exporter = StartupFileExporter(str(target))
    assert exporter.export(_spans()).name == "SUCCESS"
    for f in target.iterdir():
        f.unlink()
    target.rmdir()
    assert exporter.export(_spans()).name == "SUCCESS"
    assert mode(target) == 0o700 and len(list(target.iterdir())) == 1
