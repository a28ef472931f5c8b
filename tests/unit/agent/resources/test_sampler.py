"""The resource sampler (agent/resources/sampler.py): each span gets its resource summary; it stops after its tail
and its instruments go quiet. Every tick of a thread of ours takes the GIL from vLLM's main thread while it works (a
wait of that thread each: issue 58), so the sampler ticks every SAMPLE_BUSY_MS while its process works and at
SAMPLE_HZ only while a waiting phase is open (the main thread idle on another process); between ticks the span
boundaries read the same, and the kernel's high-water mark gives a span's RSS peak where it rose inside it."""

from __future__ import annotations

import resource
import threading
import time

import pytest
from opentelemetry import trace as trace_api

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources.procfs import rss_bytes
from vllm_otel_startup.agent.resources.sampler import Sampler


def _ticks(s: Sampler, seconds: float) -> int:
    before = len(s.times)
    time.sleep(seconds)
    return len(s.times) - before


def test_it_ticks_rarely_while_its_process_works_and_fast_while_it_waits(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "10")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "30000")
    s = Sampler(host=False)
    s.start()
    try:
        assert _ticks(s, 0.3) == 0  # working: its next tick is 30 s away
        s.waiting_changed(1)  # a waiting phase began: at 10 Hz from now on
        assert _ticks(s, 0.55) >= 4
        s.waiting_changed(-1)
        time.sleep(0.15)  # the fast tick already due when it ended
        assert _ticks(s, 0.3) == 0
    finally:
        s.stop_now(2.0)
    assert s.stopped  # a stop ends the long wait at once


def test_a_waiting_span_makes_its_process_sample_fast_while_it_is_open(start):
    s = start("api_server", "0.33.0")
    with trace_api.get_tracer("vllm.v1.engine.utils").start_as_current_span("Engine handshake"):
        assert s.rt.sampler.waiting == 1  # the API server waits on its EngineCore: its main thread idles
    assert s.rt.sampler.waiting == 0


def test_span_boundaries_read_between_ticks(monkeypatch):
    """A span with readings inside it (its children's starts and ends) has its cores peak from them, with no tick;
    readings closer than 1 / SAMPLE_HZ are folded into the next."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "30000")
    s = Sampler(host=False)
    s.start()
    try:
        a = s.snapshot()
        for _ in range(4):  # four children, 0.12 s of CPU each
            t = time.process_time()
            while time.process_time() - t < 0.12:
                pass
            s.snapshot()
            s.snapshot()  # the next child's start, right after: folded
        b = s.snapshot()
    finally:
        s.stop_now(2.0)
    summary = s.summary(a, b)
    assert summary[sc.RES_SAMPLES] == 4
    assert summary[sc.RES_CORES_AVG] - 0.15 <= summary[sc.RES_CORES_PEAK] <= 1.5


def test_a_spans_rss_peak_is_the_kernels_high_water_mark_where_it_rose_inside_it():
    s = Sampler(host=False)
    a = s.snapshot()
    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    grow = max(0, hwm - (rss_bytes() or 0)) + 200 * 2**20  # past the process's peak so far
    block = bytearray(grow)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident
    del block
    b = s.snapshot()
    assert (b.rss or 0) < b.hwm  # the memory is gone again at the span's end
    assert s.summary(a, b)[sc.RES_RSS_PEAK] == b.hwm >= a.hwm + 150 * 2**20


def test_each_span_gets_its_resource_summary(start, monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "50")
    s = start("worker", "0.33.0")
    from opentelemetry import trace

    wall, cpu = time.perf_counter(), time.process_time()
    with trace.get_tracer("vllm.v1.worker.gpu_worker").start_as_current_span("Allocate KV cache"):  # as vLLM does
        t = time.process_time()
        while time.process_time() - t < 0.3:  # a CPU-bound phase: one core busy for 0.3 s of its own CPU time
            pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    [alloc] = s.spans("Allocate KV cache")
    a = alloc.attributes
    assert a[sc.RES_CPU_TIME] == pytest.approx(cpu, abs=0.05)
    # the cores this process kept busy, as the test measures them itself: 1.0 on an idle machine, less where
    # other work shares the cores (the sampler must see the same, not a figure of this machine)
    assert a[sc.RES_CORES_AVG] == pytest.approx(cpu / wall, abs=0.1), (a[sc.RES_CORES_AVG], cpu, wall)
    assert a[sc.RES_SAMPLES] >= 1 and a[sc.RES_CORES_AVG] - 0.1 <= a[sc.RES_CORES_PEAK] <= 1.5
    assert a[sc.RES_RSS_PEAK] > 10e6 and sc.RES_DISK_READ in a
    assert sc.RES_GPU_MEMORY_DELTA not in a  # no GPU here: absent, not zero
    s.rt.finish()
    proc = s.spans(sc.WORKER_PROCESS_SPAN)[0].attributes
    assert proc[sc.RES_CPU_TIME] >= a[sc.RES_CPU_TIME]
    assert list(proc[sc.COMMAND_ARGS]) == ["vllm", "serve", "m"]


def test_the_sampler_stops_after_its_tail_and_its_instruments_go_quiet(metrics_reader, monkeypatch):
    from opentelemetry import metrics

    from vllm_otel_startup.agent.export.otel_metrics import meter, register_resource_instruments

    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "50")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "0")  # 50 Hz throughout
    sampler = Sampler(host=True)
    sampler.start()
    register_resource_instruments(meter(metrics.get_meter_provider()), sampler)
    time.sleep(0.2)

    def names() -> set[str]:
        data = metrics_reader.get_metrics_data()
        return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                if any(True for _ in m.data.data_points)} if data else set()

    live = names()
    assert {"process.cpu.time", "process.memory.usage", "vllm.startup.cpu.cores"} <= live
    assert not any(n.startswith("hw.") for n in live)  # no GPU on this host
    flushed = []
    sampler.stop_after(0.1, lambda: flushed.append(True))
    sampler.join(5)
    assert flushed == [True] and sampler.stopped
    assert names() == set()
    summary = sampler.host_summary()
    assert summary[sc.RES_TREE_CPU_TIME] > 0 and summary[sc.RES_SYSTEM_CORES_BUSY_PEAK] >= 0


def _counting(monkeypatch, s: Sampler) -> list[float]:
    """The times of ``s``'s ticks, as they come."""
    ticks: list[float] = []
    sample = s._sample  # noqa: SLF001

    def counted(*args, **kwargs):
        ticks.append(time.monotonic())
        return sample(*args, **kwargs)

    monkeypatch.setattr(s, "_sample", counted)
    return ticks


def test_it_has_no_thread_while_the_process_imports_and_its_jobs_run_an_interval_after_them(monkeypatch):
    """A thread of ours beside a process's imports takes the GIL from them at its start and at every tick (on the
    H100 the API server's two busy ticks inside its imports cost its main thread 20-46 waits each), and a refresh or
    an export there competes with them: the thread starts once the imports are over, and its jobs first run an
    interval later, not at once beside the main thread's next steps."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "300")
    s = Sampler(host=False)
    ticks = _counting(monkeypatch, s)
    s.start(importing=True)
    ran: list[float] = []
    assert s.every(0.4, lambda: ran.append(time.monotonic()))
    try:
        time.sleep(0.5)
        assert s._thread is None and ticks == [] and ran == []  # noqa: SLF001
        assert s.snapshot().cpu_ns > 0  # the span boundaries still read
        over = time.monotonic()
        s.imports_over()
        deadline = time.monotonic() + 5
        while not ran and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ran and ran[0] - over >= 0.39  # its interval from the imports' end, not at once (due since 0.4 s)
        s.imports_over()  # once
    finally:
        s.stop_now(2.0)


def test_a_start_that_ends_while_importing_never_starts_the_thread():
    s = Sampler(host=False)
    s.start(importing=True)
    stopped: list[bool] = []
    s.stop_after(0.0, lambda: stopped.append(True))
    s.imports_over()
    assert stopped == [True] and s.stopped and s._thread is None  # noqa: SLF001


def test_told_when_to_stop_it_takes_no_tick_then_but_its_last_one_at_the_stop(monkeypatch):
    """stop_after comes at a ready point, when the main thread serves its first requests: a tick there would take the
    GIL from it; the thread only wakes to wait for the stop time, where it takes its last reading."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "60000")
    s = Sampler(host=False)
    ticks = _counting(monkeypatch, s)
    s.start()
    time.sleep(0.1)
    told, stopped = time.monotonic(), []
    s.stop_after(0.4, lambda: stopped.append(True))
    s.join(5)
    assert stopped == [True] and len(ticks) == 1 and ticks[0] - told >= 0.39


def test_the_api_servers_thread_starts_when_it_first_waits_not_as_its_imports_end(monkeypatch):
    """Right after its imports the API server parses its arguments and starts its engine, then waits on it: a
    thread's start there hands the GIL back and forth with its main thread (6 waits on the 2-core host), so the
    thread starts as that wait begins. Until then its span boundaries take the readings."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "60000")
    s = Sampler(host=True)
    ran: list[float] = []
    s.start(importing=True)
    assert s.every(0.2, lambda: ran.append(time.monotonic()))
    try:
        s.imports_over()
        assert s.snapshot().cpu_ns > 0 and s._thread is None  # noqa: SLF001
        time.sleep(0.3)
        assert ran == [] and s._thread is None  # noqa: SLF001
        s.waiting_changed(+1)  # the engine's start: its main thread idles
        assert s._thread is not None and s._thread.is_alive()  # noqa: SLF001
        deadline = time.monotonic() + 5
        while not ran and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ran  # its jobs at their own pace while it waits
    finally:
        s.stop_now(2.0)


def test_an_api_server_that_never_waits_starts_its_thread_at_a_boundary_a_busy_interval_on(monkeypatch):
    """An engine in the API server's own process (no waiting phase): its thread starts at the first span boundary
    once a busy interval passed, when its first tick would be due anyway."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "10")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "300")
    s = Sampler(host=True)
    s.start(importing=True)
    try:
        s.imports_over()
        s.snapshot()
        assert s._thread is None  # noqa: SLF001
        time.sleep(0.35)
        s.snapshot()
        assert s._thread is not None and s._thread.is_alive()  # noqa: SLF001
    finally:
        s.stop_now(2.0)


def test_a_ready_point_before_the_threads_start_still_samples_the_tail_on_its_thread(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "60000")
    s = Sampler(host=True)
    s.start(importing=True)
    s.imports_over()
    stopped: list[str] = []
    s.stop_after(0.2, lambda: stopped.append(threading.current_thread().name))
    assert stopped == []  # never the ready point's main thread
    s.join(5)
    assert stopped == ["vllm-otel-startup-sampler"] and s.stopped


def test_when_the_last_wait_ends_the_next_tick_comes_a_busy_interval_later(monkeypatch):
    """The API server builds its app once its engine answered: the fast tick already due then would take the GIL
    from its main thread a dozen times (the 2-core host), so ticks and jobs slow down as the wait ends."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "4")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "60000")
    s = Sampler(host=False)
    ticks = _counting(monkeypatch, s)
    ran: list[float] = []
    s.start()
    s.waiting_changed(+1)
    assert s.every(0.25, lambda: ran.append(time.monotonic()), busy_s=60)
    try:
        deadline = time.monotonic() + 5
        while len(ticks) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(ticks) >= 2  # fast while it waits
        s.waiting_changed(-1)
        ended, seen, jobs = time.monotonic(), len(ticks), len(ran)
        time.sleep(0.7)
        assert len(ticks) == seen and len(ran) == jobs, (ticks, ended)
    finally:
        s.stop_now(2.0)
