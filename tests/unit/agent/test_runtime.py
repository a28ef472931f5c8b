"""agent/runtime.py: one process's startup state. Its process span opens at the process's creation (the root of a
new trace in the API server, a child of the spawning span elsewhere) with the interpreter's start and the open
bootstrap segment; a segment ends where the next begins; the start ends once (ready, failed or exited) with the
coverage figures; causes wait for their phase's span; the start mode is vLLM's cache root's. (Several API servers:
behaviour/test_launcher.py; a forked child: behaviour/test_fork.py.)"""

from __future__ import annotations

import time

from spans import assert_attributes, process_attributes

from vllm_otel_startup import semconv as sc


def test_the_api_servers_root_opens_at_the_processs_creation_with_the_start_mode(start):
    s = start("api_server", "0.33.0")
    rt = s.rt
    assert rt.process_span.name == sc.ROOT_SPAN and rt.process_span.parent is None  # a new trace per start
    assert rt.process_span.start_time == rt.info.create_ns
    assert rt.open_segment == (sc.IMPORTS_SPAN, rt.info.hook_ns)
    # made once the imports are over: a span ended while a process imports has the SDK's batch processor export it
    # on its thread beside those imports (issue 58)
    # and no sampler thread while the process imports: the API server's starts once they are over, as it first
    # waits on its engine (or at a span boundary a busy interval later)
    assert s.spans(sc.INTERPRETER_START_SPAN) == [] and rt.sampler._thread is None  # noqa: SLF001
    rt.close_segment(time.time_ns(), sc.CLI_SPAN)
    assert rt.sampler._thread is None and rt.sampler._launch_at is not None  # noqa: SLF001
    rt.sampler.waiting_changed(+1)
    assert rt.sampler._thread.is_alive()  # noqa: SLF001
    rt.sampler.waiting_changed(-1)
    [interp] = s.spans(sc.INTERPRETER_START_SPAN)
    assert (interp.start_time, interp.end_time) == (rt.info.create_ns, rt.info.hook_ns)
    assert interp.parent.span_id == rt.process_span.get_span_context().span_id
    assert rt.trace_id() == f"{rt.process_span.get_span_context().trace_id:032x}"


def test_a_segment_ends_where_the_next_begins(start):
    s = start("engine_core", "0.33.0")
    rt = s.rt
    at = time.time_ns()
    rt.close_segment(at, sc.CLI_SPAN)
    assert rt.open_segment == (sc.CLI_SPAN, at)
    later = at + 5_000_000
    rt.close_segment(later)
    [imports], [cli] = s.spans(sc.IMPORTS_SPAN), s.spans(sc.CLI_SPAN)
    assert imports.end_time == cli.start_time == at and cli.end_time == later
    assert rt.open_segment is None


def test_the_start_ends_once_with_its_outcome_and_coverage(start):
    s = start("engine_core", "0.33.0")
    rt = s.rt
    rt.finish(outcome="ready")
    assert rt.done
    rt.finish(outcome="failed")  # a second end changes nothing
    [proc] = s.spans(sc.ENGINE_CORE_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("engine_core", **{sc.OUTCOME: "ready"}))
    assert proc.attributes[sc.UNEXPLAINED_S] >= 0 and proc.attributes[sc.LARGEST_GAP_S] >= 0


def test_a_start_that_fails_names_the_error(start):
    s = start("worker", "0.33.0")
    err = RuntimeError("CUDA out of memory")
    s.rt.finish(error=err, outcome="failed")
    [proc] = s.spans(sc.WORKER_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("worker", **{sc.OUTCOME: "failed", sc.ERROR_TYPE: "RuntimeError"}))
    assert proc.status.status_code.name == "ERROR"


def test_pending_causes_wait_for_their_phase_and_are_taken_once(start):
    rt = start("worker", "0.33.0").rt
    rt.add_pending("torch_compile", {"a": 1})
    rt.add_pending("torch_compile", {"b": 2})
    assert rt.pop_pending("torch_compile") == {"a": 1, "b": 2}
    assert rt.pop_pending("torch_compile") == {}
