"""An engine is a start wherever it is created (issue 60): a multiprocessing child of a program that is not vLLM's
server (``vllm bench startup`` builds each iteration's ``LLM`` in one) may become a start's root; vLLM's own
children never do (vLLM's own spans outside any start: agent/foundation/test_fragments.py)."""

from __future__ import annotations

import os
import time

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.process import ENV_KIND, ENV_PARENT, OTHER, ProcessInfo, classify

SPAWNED = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
           "--multiprocessing-fork"]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _info(argv: list[str], environ: dict[str, str]) -> ProcessInfo:
    now = time.time_ns()
    return ProcessInfo(classify(argv, environ), os.getpid(), now, "proc", now, argv)


@pytest.mark.parametrize("argv, environ, may", [
    (SPAWNED, {}, True),  # a multiprocessing child of any program: vllm bench startup's iterations, a host's workers
    (["python", "script.py"], {}, True),  # a user's script
    (SPAWNED, {ENV_KIND: "engine_core", ENV_PARENT: TRACEPARENT}, False),  # vLLM's own child (a spawn patch point)
    (SPAWNED, {ENV_PARENT: TRACEPARENT}, False),  # handed a parent span: part of a start already
    (["python", "-m", "torch._inductor.compile_worker"], {}, False),  # a helper
    (["vllm", "serve", "m"], {}, False),  # the API server: a root by its command line
])
def test_who_may_start_an_engine_of_its_own(monkeypatch, argv, environ, may):
    for k in (ENV_KIND, ENV_PARENT):
        monkeypatch.delenv(k, raising=False)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    assert _info(argv, environ).may_embed() is may


def test_a_multiprocessing_child_without_vllms_marks_is_other():
    assert classify(SPAWNED, {}) == OTHER


@pytest.fixture
def program(otel, tmp_path, monkeypatch):
    """A program of the user's (kind OTHER) under the instrumentor, with a fake vLLM 0.33 importable: nothing is set up
    until it imports vLLM's engine front end."""
    import fake_vllm

    from vllm_otel_startup import VllmStartupInstrumentor

    provider, exporter = otel
    root = fake_vllm.write_tree(tmp_path / "fake", "0.33.0")
    fake_vllm.purge()
    monkeypatch.syspath_prepend(str(root))
    now = time.time_ns()
    info = ProcessInfo(OTHER, os.getpid(), now - 50_000_000, "proc", now, ["python", "script.py"])
    monkeypatch.setattr(ProcessInfo, "current", classmethod(lambda cls: info))
    for k in (ENV_KIND, ENV_PARENT):
        monkeypatch.delenv(k, raising=False)
    instrumentor = VllmStartupInstrumentor()
    instrumentor.instrument(tracer_provider=provider, skip_dep_check=True)
    yield exporter
    instrumentor.uninstrument()
    fake_vllm.purge()


def test_each_engine_a_program_builds_is_a_start_of_its_own(program):
    """Several engines built one after another in one process (a sweep, a retry, vLLM's own benchmark run in one
    process): one start each, a trace each. The first begins at the process's creation, with its imports; a later
    one at its engine's construction, with no interpreter start or imports of its own (they were the first's)."""
    from vllm.entrypoints.llm import LLM  # the trigger: this process becomes a start's root

    before = time.time_ns()
    LLM()
    between = time.time_ns()
    LLM()
    LLM()
    spans = program.get_finished_spans()
    roots = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time)
    assert [r.name for r in roots] == [sc.ROOT_SPAN] * 3
    assert len({r.context.trace_id for r in roots}) == 3
    first, second, third = roots
    assert first.start_time < before and first.attributes[sc.PROCESS_CREATE_TIME_SOURCE] == "proc"
    assert second.start_time >= between and second.start_time >= first.end_time
    assert third.start_time >= second.end_time
    for root in roots:
        trace_spans = [s for s in spans if s.context.trace_id == root.context.trace_id]
        names = [s.name for s in trace_spans]
        assert names.count("LLM init") == 1, names
        [init] = [s for s in trace_spans if s.name == "LLM init"]
        assert init.parent.span_id == root.context.span_id and init.end_time <= root.end_time
        assert root.attributes[sc.OUTCOME] == "ready" and root.attributes[sc.PROCESS_KIND] == "api_server"
        if root is not first:
            assert root.attributes[sc.PROCESS_CREATE_TIME_SOURCE] == "engine"
            assert sc.IMPORTS_SPAN not in names and sc.INTERPRETER_START_SPAN not in names
    assert sc.IMPORTS_SPAN in [s.name for s in spans if s.context.trace_id == first.context.trace_id]
