"""A finished phase leaves the process when it ends (not at the batch processor's next tick), the thread that ends
it never waits for that export, and a start that fails waits for its export no longer than a ready point does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export import nudge, ready
from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
from vllm_otel_startup.agent.export.processor import StartupSpanProcessor
from vllm_otel_startup.agent.foundation.process import ProcessInfo
from vllm_otel_startup.agent.runtime import Runtime

SRC = Path(__file__).resolve().parents[4] / "src"
TICK_MS = 60_000  # the batch processor's own schedule: far beyond any wait below, so only the nudge can export


@pytest.fixture(autouse=True)
def each_phase(monkeypatch):
    """The switch these tests are about (off by default: test_by_default_a_phase_waits_for_the_batch_schedule)."""
    monkeypatch.setenv(settings.EXPORT_EACH_PHASE.name, "true")


def runtime(*exporters, kind: str = "worker") -> tuple[Runtime, TracerProvider]:
    provider = TracerProvider()
    for exporter in exporters:  # one batch processor per exporter, as the SDK's configurator builds them
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=TICK_MS))
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME)
    now = time.time_ns()
    rt = Runtime(ProcessInfo(kind, os.getpid(), now - 10**8, "proc", now, ["vllm", "serve"]), tracer, provider)
    provider.add_span_processor(StartupSpanProcessor(rt))  # after the batch processor, as the configurator orders
    rt.start()
    return rt, provider


def stop(rt: Runtime, provider: TracerProvider) -> None:
    rt.active = False
    rt.nudge.stop()
    if rt.sampler is not None:
        rt.sampler.stop_after(0)
    provider.shutdown()


def wait_for(pred, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return False


def test_by_default_a_phase_waits_for_the_batch_schedule_and_no_thread_of_ours_exports(monkeypatch):
    """Issue 25: an export per phase took the GIL beside vLLM's busy main thread tens of times a process; by default
    spans leave on the SDK's schedule, at the ready point and at exit."""
    monkeypatch.delenv(settings.EXPORT_EACH_PHASE.name)
    exporter = InMemorySpanExporter()
    rt, provider = runtime(exporter)
    try:
        with rt.tracer.start_as_current_span("Load weights"):
            pass
        assert not wait_for(lambda: exporter.get_finished_spans(), timeout=0.3)
        assert not any(t.name.startswith("vllm-otel-startup-export") for t in threading.enumerate()
                       if t.is_alive()) and rt.nudge.flushes == 0
        provider.force_flush()  # what the ready point does
        assert "Load weights" in {s.name for s in exporter.get_finished_spans()}
    finally:
        stop(rt, provider)


def test_a_phase_is_exported_when_it_ends_not_at_the_next_batch_tick():
    exporter = InMemorySpanExporter()
    rt, provider = runtime(exporter)
    try:
        with rt.tracer.start_as_current_span("Load weights"):
            pass
        assert wait_for(lambda: "Load weights" in {s.name for s in exporter.get_finished_spans()}), \
            "the phase waited for the batch processor's tick"
    finally:
        stop(rt, provider)


@pytest.mark.parametrize(("name", "inner", "inner_phase"), [
    # a detail span (a compile region) refines the phase it runs in
    ("Profile run", "Inductor", "torch_compile_stage"),
    # a warm start loads tens of compiled graphs a second, a `Compile graph` span each: one export each would hold
    # the GIL beside the loading thread
    ("Dynamo bytecode transform", "Compile graph", "compile_graph"),
], ids=["detail", "burst"])
def test_spans_inside_a_phase_do_not_wake_the_export_their_phase_does(name, inner, inner_phase):
    rt, provider = runtime(InMemorySpanExporter())
    calls = []
    rt.nudge.notify = lambda: calls.append(True)
    try:
        with rt.tracer.start_as_current_span(name):  # its start ends the open bootstrap segment: a phase
            calls.clear()
            for _ in range(3):
                rt.tracer.start_span(inner, attributes={sc.PHASE: inner_phase}).end()
            assert calls == []
        assert calls == [True]
    finally:
        stop(rt, provider)


class Stuck(InMemorySpanExporter):
    """A collector that never answers: export blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans):
        self.entered.set()
        self.release.wait(30)
        return super().export(spans)


def test_the_thread_that_ends_a_phase_never_waits_for_its_export():
    exporter = Stuck()
    rt, provider = runtime(exporter)
    took: list[float] = []

    def phases() -> None:
        for name in ("Init device", "Load weights", "Load model"):
            span = rt.tracer.start_span(name)
            t0 = time.perf_counter()
            span.end()
            took.append(time.perf_counter() - t0)
            assert exporter.entered.wait(10)  # the export thread is now stuck in the collector

    try:
        t = threading.Thread(target=phases)
        t.start()
        t.join(10)
        assert not t.is_alive(), "ending a phase waited for the stuck export"
        print("span.end() of a phase while the export is stuck: " + ", ".join(f"{1e6 * x:.0f} us" for x in took))
        exporter.release.set()
        assert wait_for(lambda: {"Init device", "Load weights", "Load model"}
                        <= {s.name for s in exporter.get_finished_spans()})
    finally:
        exporter.release.set()
        stop(rt, provider)


def test_a_stuck_collector_does_not_hold_up_the_local_file():
    collector, local = Stuck(), InMemorySpanExporter()
    rt, provider = runtime(collector, local)  # the collector first, as OTEL_TRACES_EXPORTER=otlp,vllm_startup_file
    try:
        with rt.tracer.start_as_current_span("Load weights"):
            pass
        assert collector.entered.wait(10)
        assert wait_for(lambda: "Load weights" in {s.name for s in local.get_finished_spans()})
    finally:
        collector.release.set()
        stop(rt, provider)


def test_a_failing_start_waits_for_its_hand_over_but_not_for_a_stuck_export(monkeypatch):
    """Before: FAILURE_FLUSH_MS (5 s) of waiting on a collector that does not answer, per process."""
    exporter = Stuck()
    rt, provider = runtime(exporter)
    handed: list[float] = []

    def publish(_rt) -> None:
        time.sleep(0.2)  # slow local work: recorded metrics must exist before the SDK shuts down at exit
        handed.append(time.monotonic())

    monkeypatch.setattr(ready, "publish", publish)
    try:
        with rt.tracer.start_as_current_span("Load weights"):
            pass
        assert exporter.entered.wait(10)  # the collector holds the export
        t0 = time.monotonic()
        rt.finish(error=RuntimeError("load failed"))
        took = time.monotonic() - t0
        assert handed and handed[0] <= t0 + took  # the hand-over completed before finish returned
        assert took < 2.0, took  # bounded like a ready point: 0.2 s of hand-over + FLUSH_MS, not 5 s
    finally:
        exporter.release.set()
        stop(rt, provider)


def test_the_failure_wait_setting_is_the_hand_over_cap():
    assert settings.seconds_from_ms(settings.FAILURE_FLUSH_MS, {}) == 1.0
    assert settings.seconds_from_ms(settings.FLUSH_MS, {}) == 0.025


CHILD = textwrap.dedent("""
    import os, sys, time
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from vllm_otel_startup import semconv as sc
    from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
    from vllm_otel_startup.agent.foundation.process import ProcessInfo
    from vllm_otel_startup.agent.export.processor import StartupSpanProcessor
    from vllm_otel_startup.agent.runtime import Runtime

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(StartupFileExporter(sys.argv[1]), schedule_delay_millis=60_000))
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME)
    now = time.time_ns()
    rt = Runtime(ProcessInfo("worker", os.getpid(), now, "proc", now, ["vllm"]), tracer, provider)
    provider.add_span_processor(StartupSpanProcessor(rt))
    rt.start()
    with tracer.start_as_current_span("Load weights"):
        pass
    print("ended", time.time_ns(), flush=True)
    while True:  # busy in Python, as vLLM's next phase would be, until killed
        sum(range(1000))
""")


def test_a_process_killed_right_after_a_phase_has_already_exported_it(tmp_path):
    """SIGKILL runs nothing: the phase is kept only because it left when it ended (the batch tick is 60 s here)."""
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("ended"), line
        assert wait_for(lambda: any('"name":"Load weights"' in p.read_text() for p in tmp_path.glob("*.jsonl")))
        seen = time.time_ns()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        print(f"phase in the file {(seen - int(line.split()[1])) / 1e6:.1f} ms after it ended (upper bound)")
    finally:
        if proc.poll() is None:
            proc.kill()
    [f] = tmp_path.glob("*.jsonl")
    assert '"name":"Load weights"' in f.read_text()


def test_one_export_thread_per_batch_processor_or_the_providers_flush():
    from vllm_otel_startup.agent.export.nudge import _flushes

    provider = TracerProvider()
    a, b = BatchSpanProcessor(InMemorySpanExporter()), BatchSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(a)
    provider.add_span_processor(b)
    assert _flushes(provider) == [a.force_flush, b.force_flush]

    class Other:  # not the SDK's provider: its own flush, all processors in turn
        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    other = Other()
    assert _flushes(other) == [other.force_flush]
    assert _flushes(object()) == []
    provider.shutdown()


def test_with_debug_on_the_self_cost_line_counts_the_exports_and_those_a_phase_woke(monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_DEBUG: how many exports a process made during its start, of how many spans, and how
    many of them a phase's end started (issue 25: the export thread takes the GIL beside vLLM's main thread)."""
    from vllm_otel_startup.agent.foundation import self_cost

    monkeypatch.setenv(settings.DEBUG.name, "true")
    exporter = InMemorySpanExporter()
    rt, provider = runtime(exporter)
    try:
        for name in ("Load weights", "Init device"):
            with rt.tracer.start_as_current_span(name):
                pass
            assert wait_for(lambda n=name: n in {s.name for s in exporter.get_finished_spans()})
        assert rt.exports is not None
        line = self_cost.line("worker", rt.cost, None, None, rt.nudge, rt.exports)
        found = re.search(r"exports (\d+) of (\d+) spans, (\d+) woken by a phase's end", line)
        assert found, line
        exports, spans, woken = map(int, found.groups())
        # every export here was woken by a phase's end (the batch tick is a minute); on a loaded host a phase and the
        # segment its start closed can wake the thread twice, and a wake that finds the queue empty exports nothing
        assert 2 <= exports <= woken and spans >= 2
    finally:
        stop(rt, provider)


def test_without_debug_nothing_counts_the_exports(monkeypatch):
    monkeypatch.delenv(settings.DEBUG.name, raising=False)
    rt, provider = runtime(InMemorySpanExporter())
    try:
        assert rt.exports is None
    finally:
        stop(rt, provider)


def ready_flush(monkeypatch, *exporters) -> tuple[TracerProvider, threading.Thread, list[str]]:
    """A phase span queued in each of ``exporters``' batch processors (in that order), then the ready point's flush on
    a thread of its own, as ready.flush runs it; also the names of the threads it starts."""
    provider = TracerProvider()
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=TICK_MS))
    with provider.get_tracer(sc.INSTRUMENTATION_NAME).start_as_current_span("Load weights",
                                                                           attributes={sc.PHASE: "load_weights"}):
        pass
    started: list[str] = []
    real_start = nudge.threads.start

    def start(thread: threading.Thread) -> bool:
        started.append(thread.name)
        return real_start(thread)

    monkeypatch.setattr(nudge.threads, "start", start)
    t = threading.Thread(target=nudge.flush_each, args=(provider, 30_000), daemon=True)
    t.start()
    return provider, t, started


def exported(exporter) -> set[str]:
    return {s.name for s in exporter.get_finished_spans()}


def test_the_ready_point_writes_the_local_file_first_and_exports_to_a_lone_collector_with_no_thread_of_its_own(
        tmp_path, monkeypatch):
    """Each thread the ready point starts takes the GIL beside vLLM's main thread: the local file is written on the
    flush thread before any collector is asked, and a single collector exports there too."""
    collector, local = Stuck(), StartupFileExporter(str(tmp_path))
    provider, t, started = ready_flush(monkeypatch, collector, local)  # as OTEL_TRACES_EXPORTER=otlp,vllm_startup_file
    try:
        assert collector.entered.wait(10)  # the collector holds the export ...
        assert wait_for(lambda: any(tmp_path.glob("*.jsonl")))  # ... and the local file has the span already
        assert "Load weights" in next(tmp_path.glob("*.jsonl")).read_text()
        assert started == []
    finally:
        collector.release.set()
    t.join(10)
    assert not t.is_alive() and exported(collector) == {"Load weights"}
    provider.shutdown()


def test_with_several_collectors_a_stuck_one_never_holds_up_another(monkeypatch):
    stuck, other = Stuck(), InMemorySpanExporter()
    provider, t, started = ready_flush(monkeypatch, stuck, other)
    try:
        assert stuck.entered.wait(10)
        assert wait_for(lambda: exported(other) == {"Load weights"})
        assert started == ["vllm-otel-startup-flush-0", "vllm-otel-startup-flush-1"]
    finally:
        stuck.release.set()
    t.join(10)
    provider.shutdown()
