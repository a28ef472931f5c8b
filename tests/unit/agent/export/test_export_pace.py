"""When spans leave a starting process (issue 58): an export is Python on the batch processor's thread, and beside
vLLM's busy main thread each one makes that thread wait for the GIL. So while a process works its batch processors
export at most every EXPORT_BUSY_MS; while a waiting phase is open in it (its main thread idle on another process)
and from the start's end on, on their own schedule. Its metrics export while starting follows the same pace."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export.processor import StartupSpanProcessor
from vllm_otel_startup.agent.foundation.process import ProcessInfo
from vllm_otel_startup.agent.resources.sampler import Sampler
from vllm_otel_startup.agent.runtime import Runtime

OWN_MS = 150  # the batch processor's own schedule (the SDK's default is 5 s)


def runtime(exporter, own_ms: int = OWN_MS, kind: str = "api_server") -> tuple[Runtime, TracerProvider, Any]:
    provider = TracerProvider()
    bsp = BatchSpanProcessor(exporter, schedule_delay_millis=own_ms)
    provider.add_span_processor(bsp)
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME)
    now = time.time_ns()
    rt = Runtime(ProcessInfo(kind, os.getpid(), now - 10**8, "proc", now, ["vllm", "serve"]), tracer, provider)
    provider.add_span_processor(StartupSpanProcessor(rt))
    rt.start()
    return rt, provider, bsp


def schedule(bsp: BatchSpanProcessor) -> float:
    return bsp._batch_processor._schedule_delay  # noqa: SLF001 - the SDK's batching state, what the pace sets


def exported(exporter: InMemorySpanExporter, name: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if name in {s.name for s in exporter.get_finished_spans()}:
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def pace(monkeypatch):
    monkeypatch.setenv(settings.EXPORT_BUSY_MS.name, "60000")
    made: list[tuple[Runtime, TracerProvider]] = []

    def make(*args, **kwargs):
        rt, provider, bsp = runtime(*args, **kwargs)
        made.append((rt, provider))
        return rt, provider, bsp

    yield make
    for rt, provider in made:
        rt.active = False
        rt.nudge.stop()
        if rt.sampler is not None:
            rt.sampler.stop_after(0)
        provider.shutdown()


def test_while_a_process_works_its_spans_wait_for_the_busy_interval(pace):
    exporter = InMemorySpanExporter()
    rt, _, bsp = pace(exporter)
    assert schedule(bsp) == 60.0
    with rt.tracer.start_as_current_span("Load weights"):
        pass
    assert not exported(exporter, "Load weights", within=4 * OWN_MS / 1000)


def test_a_waiting_phase_brings_the_sdks_schedule_back_and_its_end_the_busy_interval(pace):
    exporter = InMemorySpanExporter()
    rt, provider, bsp = pace(exporter)
    with rt.tracer.start_as_current_span("Load weights"):
        pass
    waiting = provider.get_tracer("vllm.v1.engine.utils").start_span("Engine handshake")  # vLLM's own waiting span
    assert schedule(bsp) == OWN_MS / 1000
    # the worker was in its long wait: woken, it waits the short one, so what ended while busy leaves now
    assert exported(exporter, "Load weights", within=10 * OWN_MS / 1000)
    waiting.end()
    assert schedule(bsp) == 60.0


def test_from_the_start_s_end_on_the_sdks_own_schedule(pace):
    exporter = InMemorySpanExporter()
    rt, _, bsp = pace(exporter)
    rt.finish()  # the ready point (also a failure's and exit's)
    assert schedule(bsp) == OWN_MS / 1000
    rt.tracer.start_span("after ready").end()  # a request's span, say
    assert exported(exporter, "after ready", within=10 * OWN_MS / 1000)


def test_a_longer_own_schedule_is_left_alone(pace):
    rt, _, bsp = pace(InMemorySpanExporter(), own_ms=120_000)
    assert schedule(bsp) == 120.0
    rt.nudge.waiting_changed(1)
    assert schedule(bsp) == 120.0


def test_zero_keeps_the_sdks_schedule_throughout(pace, monkeypatch):
    monkeypatch.setenv(settings.EXPORT_BUSY_MS.name, "0")
    rt, _, bsp = pace(InMemorySpanExporter())
    assert schedule(bsp) == OWN_MS / 1000


def test_with_export_each_phase_the_phases_pace_themselves(pace, monkeypatch):
    monkeypatch.setenv(settings.EXPORT_EACH_PHASE.name, "true")
    rt, _, bsp = pace(InMemorySpanExporter())
    assert schedule(bsp) == OWN_MS / 1000


def test_a_later_start_of_the_same_process_slows_them_again_from_their_own_schedule(pace):
    rt, _, bsp = pace(InMemorySpanExporter())
    rt.nudge.over()
    rt.nudge.start()  # Runtime.next_start, or a forked child's start: the processors may still be slowed
    rt.nudge.start()
    assert schedule(bsp) == 60.0
    rt.nudge.over()
    assert schedule(bsp) == OWN_MS / 1000


def test_the_metrics_export_while_starting_is_rare_while_working_and_at_its_interval_while_waiting(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "60000")
    s = Sampler(host=False)
    s.start()
    ran: list[float] = []
    assert s.every(0.1, lambda: ran.append(time.monotonic()), busy_s=60.0)
    try:
        time.sleep(0.5)
        assert ran == []  # working: its next run is a minute away
        s.waiting_changed(1)
        time.sleep(0.6)
        assert len(ran) >= 3  # waiting: every 0.1 s
        s.waiting_changed(-1)
        time.sleep(0.25)  # a run already due when it ended
        n = len(ran)
        time.sleep(0.4)
        assert len(ran) == n
    finally:
        s.stop_now(2.0)


def test_at_the_ready_point_a_stuck_collector_never_holds_up_the_local_file(pace, monkeypatch):
    """While a process works its spans wait for the ready point's flush, all of them at once: there the provider's
    own flush (every processor in turn, the collector's first) would hold the local file up behind a collector that
    does not answer; each batch processor is flushed on a thread of its own (e2e: tests/e2e/test_faults.py)."""
    import threading

    class Stuck(InMemorySpanExporter):
        def __init__(self) -> None:
            super().__init__()
            self.release, self.entered = threading.Event(), threading.Event()

        def export(self, spans):
            self.entered.set()
            self.release.wait(30)
            return super().export(spans)

    collector, local = Stuck(), InMemorySpanExporter()
    rt, provider, _ = pace(collector, own_ms=5000)  # the SDK's default schedule: its worker would export in 5 s
    provider.add_span_processor(BatchSpanProcessor(local, schedule_delay_millis=5000))  # after it, as
    rt.nudge._own = None  # OTEL_TRACES_EXPORTER=otlp,vllm_startup_file orders them; both paced  # noqa: SLF001
    rt.nudge.start()
    try:
        with rt.tracer.start_as_current_span("Load weights"):
            pass
        rt.finish()
        assert collector.entered.wait(10)
        assert exported(local, "Load weights", within=2.0), "the local file waited for the stuck collector"
    finally:
        collector.release.set()
