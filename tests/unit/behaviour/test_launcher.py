"""Several API servers: the launcher (`vllm serve` itself) is the start's root, and its start ends when the last API
server it spawned accepts HTTP, as each one's spooled process span says."""

from __future__ import annotations

import tempfile
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from spans import assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import frontends, spool

S = 10**9


def api_server_spans(index: int, end_ns: int, outcome: str = "ready"):
    """An API server child's process span, as its own process would spool it."""
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("child").start_span(
        sc.API_SERVER_PROCESS_SPAN, start_time=end_ns - 5 * S,
        attributes={sc.PHASE: "api_server_process", sc.PROCESS_KIND: "api_server", sc.OUTCOME: outcome,
                    sc.API_SERVER_INDEX: index})
    span.end(end_time=end_ns)
    return exporter.get_finished_spans()


def launcher(start, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(frontends, "FRONTEND_POLL_S", 0.01)
    return start("api_server", "0.33.0")


def wait_done(started, timeout: float = 5.0) -> None:
    """Until the launcher's root span has ended (``rt.done`` turns true before finish() ends the span)."""
    deadline = time.monotonic() + timeout
    while not started.spans(sc.ROOT_SPAN) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_launcher_is_ready_when_its_last_api_server_is(start, tmp_path, monkeypatch):
    s = launcher(start, tmp_path, monkeypatch)
    rt = s.rt
    assert rt.info.root
    rt.await_frontends(2)
    tid, now = rt.trace_id(), time.time_ns()
    time.sleep(0.03)
    assert spool.write(tid, "api_server-101", api_server_spans(0, now + 10_000_000))
    time.sleep(0.05)
    assert not rt.done  # one of two: still starting
    assert spool.write(tid, "api_server-102", api_server_spans(1, now + 20_000_000))
    wait_done(s)
    [root] = s.spans(sc.ROOT_SPAN)
    [wait] = s.spans(sc.API_SERVERS_WAIT_SPAN)
    # the last API server's ready point, not when the launcher saw it
    assert root.end_time == wait.end_time == now + 20_000_000
    assert root.attributes[sc.OUTCOME] == "ready"
    assert_attributes(wait, {sc.PROCESS_KIND: "api_server", sc.PHASE: "api_server_wait", sc.WAITING: True})
    assert spool.count(tid, "api_server-") >= 2  # (the launcher spools its own for them, on its flush thread)


def test_one_failed_api_server_fails_the_start(start, tmp_path, monkeypatch):
    s = launcher(start, tmp_path, monkeypatch)
    rt = s.rt
    rt.await_frontends(2)
    tid, now = rt.trace_id(), time.time_ns()
    spool.write(tid, "api_server-101", api_server_spans(0, now - S))
    spool.write(tid, "api_server-102", api_server_spans(1, now - S, outcome="failed"))
    wait_done(s)
    [root] = s.spans(sc.ROOT_SPAN)
    assert root.attributes[sc.OUTCOME] == "failed"


def test_a_launcher_stopped_before_it_saw_them_still_ends_at_their_ready_point(start, tmp_path, monkeypatch):
    """A server stopped right after its first /health 200: the exit path looks at the spool once more."""
    s = launcher(start, tmp_path, monkeypatch)
    monkeypatch.setattr(frontends, "FRONTEND_POLL_S", 60.0)  # the watcher will not look again in time
    rt = s.rt
    rt.await_frontends(1)
    time.sleep(0.05)
    tid, now = rt.trace_id(), time.time_ns()
    spool.write(tid, "api_server-101", api_server_spans(0, now))
    rt.finish(outcome="exited")
    [root] = s.spans(sc.ROOT_SPAN)
    assert root.attributes[sc.OUTCOME] == "ready" and root.end_time == now
