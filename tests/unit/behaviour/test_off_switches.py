"""Off means off (issue 60): under ``OTEL_SDK_DISABLED=true``, ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup``
or our own ``OTEL_PYTHON_VLLM_STARTUP_DISABLED=true`` a program run by the real ``opentelemetry-instrument`` is a
plain program: the same threads, import hooks, output and files. opentelemetry-instrument still loads our distro
and configurator as entry points (OpenTelemetry's loading, not ours): the modules of ours it imports are exactly
those two entry points' modules, nothing of the agent. A probe never assumes a recording span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace

from vllm_otel_startup import settings
from vllm_otel_startup.agent.causes.base import Call, gb_per_s
from vllm_otel_startup.agent.causes.compile import AotLoad
from vllm_otel_startup.agent.causes.config import ModelInspection
from vllm_otel_startup.agent.causes.weights import WeightsLoad

INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")

# A user's program that is about to start an engine (the agent watches for vllm.entrypoints.llm): what it sees of
# itself once the sitecustomize ran, printed as one JSON line.
PROGRAM = """
import json, sys, threading
from opentelemetry import trace
print(json.dumps({
    "threads": sorted(t.name for t in threading.enumerate()),
    "meta_path": [type(f).__module__ + "." + type(f).__name__ for f in sys.meta_path],
    "ours": sorted(m for m in sys.modules if m.startswith("vllm_otel_startup")),
    "provider": type(trace.get_tracer_provider()).__name__,
    "profile": sys.getprofile() is not None, "trace": sys.gettrace() is not None,
}))
"""

ENTRY_POINT_MODULES = ("import vllm_otel_startup.agent.bootstrap.distro, "
                       "vllm_otel_startup.agent.bootstrap.environment_variables")

SWITCHES = [
    {"OTEL_SDK_DISABLED": "true"},
    {"OTEL_SDK_DISABLED": "TRUE"},  # the SDK's own reading: any case
    {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"},
    {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "requests, vllm_startup"},
    {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "*"},
    {"OTEL_PYTHON_VLLM_STARTUP_DISABLED": "true"},
]


def _env(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               OTEL_PYTHON_VLLM_STARTUP_DIR=str(tmp_path / "starts"))
    # the runner's own path, never OpenTelemetry's sitecustomize folder (the plain program must stay plain)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and "auto_instrumentation" not in p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    env.update(extra)
    return env


def _run(tmp_path: Path, extra: dict[str, str], instrumented: bool, code: str = PROGRAM) -> tuple[dict, str, str]:
    argv = [sys.executable, "-c", code]
    if instrumented:
        argv = [str(INSTRUMENT), *argv]
    done = subprocess.run(argv, env=_env(tmp_path, extra), capture_output=True, text=True, timeout=120, check=True)
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1]), done.stderr


def _files(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    seen, out, err = _run(tmp_path_factory.mktemp("plain"), {}, instrumented=False)
    entry_points, _, _ = _run(tmp_path_factory.mktemp("entry"), {}, instrumented=False,
                              code=ENTRY_POINT_MODULES + "\n" + PROGRAM)
    return {"seen": seen, "out": out, "err": err, "entry_points": entry_points["ours"]}


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not beside this interpreter")
@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_an_off_switch_gives_a_plain_program(tmp_path, plain, switch):
    seen, out, err = _run(tmp_path, switch, instrumented=True)
    assert seen["threads"] == plain["seen"]["threads"]
    assert seen["meta_path"] == plain["seen"]["meta_path"]  # no post-import hook finder of ours (wrapt's)
    assert not seen["profile"] and not seen["trace"]
    assert seen["provider"] == plain["seen"]["provider"]  # no SDK: the API's proxy provider, as in plain Python
    assert set(seen["ours"]) <= set(plain["entry_points"])  # the entry points' modules, no agent
    assert not {m for m in seen["ours"] if m.split(".")[2:3] in (["runtime"], ["assembly"], ["patching"])}
    assert (out, err) == (plain["out"], plain["err"])  # nothing printed
    assert _files(tmp_path) == []  # no start file, no spool, nothing under HOME or the cache


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not beside this interpreter")
def test_without_a_switch_the_same_program_is_instrumented(tmp_path, plain):
    """The control that makes the comparison mean something: the same run, switches off, shows the agent."""
    seen, _, _ = _run(tmp_path, {}, instrumented=True)
    assert seen["provider"] == "TracerProvider"  # the SDK's
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:  # (the launcher loads our instrumentor only beside vLLM)
        assert "vllm_otel_startup.agent.patching.post_import" in seen["ours"]  # watching for an engine's import
    assert seen["meta_path"] != plain["seen"]["meta_path"] or sys.version_info >= (3, 12)


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not beside this interpreter")
def test_the_instrumentor_diagnostic_leaves_opentelemetry_alone_under_our_configuration(tmp_path, plain):
    """The overhead benchmark's `otelonly` arm (OTEL_PYTHON_VLLM_STARTUP_OFF=instrumentor): the SDK as our distro and
    configurator set it up, its threads included, and nothing of the agent. The off switches above cannot stand in
    for it: under them our configurator sets up no SDK either, and the arm priced the launcher alone."""
    seen, out, err = _run(tmp_path, {"OTEL_PYTHON_VLLM_STARTUP_OFF": "instrumentor"}, instrumented=True)
    assert seen["provider"] == "TracerProvider"  # the SDK's
    assert any(t.startswith("Otel") for t in seen["threads"]), seen["threads"]  # its batch processor's worker
    assert not any(t.startswith("vllm-otel-startup") for t in seen["threads"])
    assert not {m for m in seen["ours"] if m.split(".")[2:3] in (["runtime"], ["assembly"], ["patching"])}
    assert seen["meta_path"] == plain["seen"]["meta_path"] and not seen["profile"] and not seen["trace"]
    assert (out, err) == (plain["out"], plain["err"])


def test_the_overhead_benchmarks_otelonly_arm_is_that_diagnostic():
    from benchmarks.arm_presets import PRESETS

    assert PRESETS["otelonly"] == {"OTEL_PYTHON_VLLM_STARTUP_OFF": "instrumentor"}
    assert settings.switched_off(PRESETS["otelonly"]) is None  # not an off switch: the SDK is set up


@pytest.mark.parametrize("environ, which", [
    ({}, None),
    ({"OTEL_SDK_DISABLED": "false"}, None),
    ({"OTEL_SDK_DISABLED": " True "}, "OTEL_SDK_DISABLED"),
    ({"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup_x"}, None),
    ({"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "flask,vllm_startup"}, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"),
    ({"OTEL_PYTHON_VLLM_STARTUP_DISABLED": "1"}, "OTEL_PYTHON_VLLM_STARTUP_DISABLED"),
    ({"OTEL_PYTHON_VLLM_STARTUP_DISABLED": "typo"}, None),
])
def test_switched_off_reads_each_switch(environ, which):
    assert settings.switched_off(environ) == which


def test_probes_never_assume_a_recording_span():
    """A NonRecordingSpan (OTEL_SDK_DISABLED under another configurator, a sampler that dropped the trace) has no
    start_time or attributes: the probes that read them leave it alone instead of raising."""
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)

    class Rt:
        local: list = []

    ModelInspection().after_call(Rt(), span, Call(None, (), {}, None))  # was: AttributeError 'start_time'
    AotLoad().after_call(Rt(), span, Call(None, (None, "/nonexistent/aot"), {}, None))
    WeightsLoad().on_ending(Rt(), span)
    assert gb_per_s(10**9, span) is None
