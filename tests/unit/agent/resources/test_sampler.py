"""The resource sampler (agent/resources/sampler.py): each span gets its resource summary; it stops after its tail
and its instruments go quiet. While a process imports it is one interpreter loading modules on the start's
critical path, and every sampler tick takes the GIL from it: it samples once a second until its first phase
begins, then at SAMPLE_HZ (issue 25)."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace as trace_api

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources import sampler as sampler_mod
from vllm_otel_startup.agent.resources.sampler import Sampler


def test_a_process_samples_once_a_second_until_its_first_phase(otel, start):
    s = start("engine_core", "0.33.0")
    assert s.rt.sampler.importing  # its imports segment is open
    with trace_api.get_tracer("vllm.engine").start_as_current_span("Load weights"):
        assert not s.rt.sampler.importing  # the first phase closed it: SAMPLE_HZ from the next tick


def test_an_importing_sampler_ticks_once_a_second_then_at_its_rate(monkeypatch):
    monkeypatch.setattr(sampler_mod, "IMPORTING_S", 30.0)  # a tick would come long after the test
    s = Sampler(host=False)
    s.start(importing=True)
    try:
        time.sleep(0.3)
        assert s.times == []  # a 10 Hz sampler would have ticked twice
        s.full_rate()  # ends the pending once-a-second wait: a phase shorter than a second is sampled too
        time.sleep(0.6)
        assert len(s.times) >= 3
    finally:
        s.stop_after(0)
        s.join(2)


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
    assert a[sc.RES_SAMPLES] >= 5 and a[sc.RES_CORES_AVG] - 0.1 <= a[sc.RES_CORES_PEAK] <= 1.5
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
