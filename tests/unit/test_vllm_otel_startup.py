"""The package's instrumentor (vllm_otel_startup/__init__.py): in vLLM's API server, EngineCore and workers it
assembles the agent and undoes it on uninstrument(); a helper process or the DISABLED setting gets nothing at all;
a setup that fails costs one warning, never the host's start; the exit hook finishes a start left open."""

from __future__ import annotations

import atexit
import logging
import os
import time

import pytest

import vllm_otel_startup as pkg
from vllm_otel_startup import VllmStartupInstrumentor
from vllm_otel_startup.agent.foundation.process import ProcessInfo


def _as(monkeypatch, kind: str) -> ProcessInfo:
    now = time.time_ns()
    info = ProcessInfo(kind=kind, pid=os.getpid(), create_ns=now - 1_000_000, create_source="proc", hook_ns=now,
                       argv=["python", "-m", "vllm.v1.engine.core"])
    monkeypatch.setattr(ProcessInfo, "current", classmethod(lambda cls: info))
    return info


@pytest.fixture
def instrumentor(otel):
    inst = VllmStartupInstrumentor()
    yield inst, otel[0]
    inst.uninstrument()


def test_a_vllm_process_gets_the_agent_and_uninstrument_takes_it_away(instrumentor, monkeypatch):
    inst, provider = instrumentor
    info = _as(monkeypatch, "engine_core")
    inst.instrument(tracer_provider=provider, skip_dep_check=True)
    rt = VllmStartupInstrumentor._runtime
    assert rt is not None and rt.info is info and VllmStartupInstrumentor._installer is not None
    inst.uninstrument()
    assert (VllmStartupInstrumentor._runtime, VllmStartupInstrumentor._assembly) == (None, None)


def test_a_helper_process_gets_nothing(instrumentor, monkeypatch):
    inst, provider = instrumentor
    _as(monkeypatch, "helper")
    inst.instrument(tracer_provider=provider, skip_dep_check=True)
    assert VllmStartupInstrumentor._assembly is None and VllmStartupInstrumentor._runtime is None


def test_disabled_means_nothing_happens(instrumentor, monkeypatch):
    inst, provider = instrumentor
    _as(monkeypatch, "api_server")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_DISABLED", "true")
    inst.instrument(tracer_provider=provider, skip_dep_check=True)
    assert VllmStartupInstrumentor._runtime is None


def test_a_failing_setup_is_one_warning_and_the_host_goes_on(instrumentor, monkeypatch, caplog):
    inst, provider = instrumentor

    def boom(cls):
        raise OSError("planted: /proc unreadable")

    monkeypatch.setattr(ProcessInfo, "current", classmethod(boom))
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        inst.instrument(tracer_provider=provider, skip_dep_check=True)  # no exception
    [record] = [r for r in caplog.records if r.name == "vllm_otel_startup"]
    assert "setup failed; startup tracing disabled" in record.getMessage() and record.exc_info is not None
    assert VllmStartupInstrumentor._runtime is None


class _Rt:
    def __init__(self, active: bool, done: bool, last_error: BaseException | None) -> None:
        self.active, self.done, self.last_error, self.finished = active, done, last_error, []

    def finish(self, error=None, outcome=None) -> None:
        self.finished.append((error, outcome))


def test_the_exit_hook_finishes_an_open_start_as_failed_or_exited():
    err = RuntimeError("model failed to load")
    failed, exited = _Rt(True, False, err), _Rt(True, False, None)
    over, idle = _Rt(True, True, None), _Rt(False, False, None)
    for rt in (failed, exited, over, idle):
        pkg._at_exit(rt)  # noqa: SLF001
    assert failed.finished == [(err, "failed")] and exited.finished == [(None, "exited")]
    assert over.finished == [] and idle.finished == []


def test_the_exit_hook_is_registered_and_unregistered_with_the_agent(instrumentor, monkeypatch):
    inst, provider = instrumentor
    seen = []
    monkeypatch.setattr(atexit, "register", lambda f, *a: seen.append(("register", f)))
    monkeypatch.setattr(atexit, "unregister", lambda f: seen.append(("unregister", f)))
    _as(monkeypatch, "worker")
    inst.instrument(tracer_provider=provider, skip_dep_check=True)
    inst.uninstrument()
    assert seen == [("register", pkg._at_exit), ("unregister", pkg._at_exit)]  # noqa: SLF001
