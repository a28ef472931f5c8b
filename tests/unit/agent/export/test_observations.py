"""Startup metrics: one derivation from spans, two export paths with the same numbers, exemplars that point
at the observed span, and a resource sampler that summarises each span and stops after ready."""

from __future__ import annotations

import importlib
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import spool
from vllm_otel_startup.agent.export.observations import (
    PHASE_LAST,
    fleet_labels,
    label_value,
    span_observations,
    start_observations,
)
from vllm_otel_startup.agent.export.prometheus import StartupCollector
from vllm_otel_startup.agent.resources.sampler import Sampler
from vllm_otel_startup.model.spanmodel import Span, from_readable

FLEET = fleet_labels({sc.MODEL: "m", sc.VLLM_VERSION: "0.33.0", sc.TP_SIZE: 2, sc.MODE: "cold"})


def span(name, phase, kind, start_s, end_s, sid, parent=None, **attrs) -> Span:
    return Span("ab" * 16, sid, parent, name, int(start_s * 1e9), int(end_s * 1e9),
                {sc.PHASE: phase, sc.PROCESS_KIND: kind, **attrs}, {})


START = [
    span("vLLM startup", "startup", "api_server", 0, 60, "01" * 8, outcome="x", **{sc.OUTCOME: "ready"}),
    span("Load weights", "weights_load", "worker", 20, 21.5, "02" * 8, "01" * 8,
         **{sc.WEIGHTS_SOURCE: "hub_cache", sc.WEIGHTS_BYTES: 3_000_000_000}),
    span("Load weights", "weights_load", "worker", 20, 22.0, "03" * 8, "01" * 8,
         **{sc.WEIGHTS_SOURCE: "hub_cache", sc.WEIGHTS_BYTES: 3_000_000_000}),
    span("torch.compile", "torch_compile", "worker", 30, 45, "04" * 8, "01" * 8, **{sc.COMPILE_CACHE_HIT: False}),
    span("Capture model", "cudagraph_capture", "worker", 45, 50, "05" * 8, "01" * 8, **{sc.CUDAGRAPH_COUNT: 67}),
    span("Model architecture inspection", "model_inspection", "api_server", 2, 3, "06" * 8, "01" * 8,
         **{sc.MODEL_INSPECTION_CACHE_HIT: True, sc.RES_CPU_TIME: 0.8, sc.RES_DISK_READ: 4096}),
]


def test_prometheus_names_follow_the_otlp_translation_rules():
    assert sc.prom_name("vllm.startup.phase.last_duration") == "vllm_startup_phase_last_duration_seconds"
    assert sc.prom_name("vllm.startup.starts") == "vllm_startup_starts_total"
    assert sc.prom_name("vllm.startup.weights.bytes") == "vllm_startup_weights_bytes_total"  # no bytes_bytes
    assert sc.prom_name("hw.gpu.utilization") == "hw_gpu_utilization_ratio"
    assert sc.prom_name("process.cpu.time") == "process_cpu_time_seconds_total"
    assert sc.prom_label(sc.PHASE) == "vllm_startup_phase"


def test_label_values_are_the_same_strings_on_both_paths():
    assert [label_value(v) for v in (True, False, 2, None, "x")] == ["true", "false", "2", "", "x"]
    assert set(FLEET) == set(sc.FLEET_LABELS) and FLEET[sc.TP_SIZE] == "2" and FLEET[sc.DEVICE] == ""


def test_each_phase_is_one_gauge_per_start_and_causes_become_counters():
    obs = span_observations(START, FLEET)
    phases = {(o.labels[sc.PHASE], o.labels[sc.PROCESS_KIND]): o for o in obs if o.metric == PHASE_LAST}
    assert set(phases) == {(s.attrs[sc.PHASE], s.attrs[sc.PROCESS_KIND]) for s in START}  # one per phase and kind
    assert phases[("weights_load", "worker")].value == pytest.approx(3.5)  # two spans of one process: added up
    assert phases[("startup", "api_server")].value == 60
    assert (phases[("torch_compile", "worker")].trace_id, phases[("torch_compile", "worker")].span_id) == \
        (START[3].trace_id, START[3].span_id)  # the exemplar: the observed span
    weights = [o for o in obs if o.metric == "vllm.startup.weights.bytes"]
    assert sum(o.value for o in weights) == 6e9 and {o.labels[sc.WEIGHTS_SOURCE] for o in weights} == {"hub_cache"}
    assert sum(o.value for o in obs if o.metric == "vllm.startup.weights.load_time") == pytest.approx(3.5)
    [compile_] = [o for o in obs if o.metric == "vllm.startup.compiles"]
    assert compile_.labels[sc.COMPILE_CACHE_HIT] == "false"
    assert [o.value for o in obs if o.metric == "vllm.startup.cudagraphs"] == [67]
    assert {o.metric for o in obs} <= set(sc.STARTUP_METRICS)  # per-span CPU and disk stay span attributes


def test_only_the_phases_a_fleet_compares_have_a_metric():
    """Nested detail (compile stages, ...) stays in the trace: a compiled start would otherwise cost its store over
    100 series; every phase a dashboard or alert names has one."""
    from dashboards import alerts, phases

    detail = span("Dynamo bytecode transform", "dynamo_transform", "worker", 30, 31, "09" * 8, "01" * 8)
    assert "dynamo_transform" not in sc.METRIC_PHASES
    assert not [o for o in span_observations([detail], FLEET) if o.metric == PHASE_LAST]
    named = {*phases.STACKED_PHASES, *phases.REGRESSION_PHASES, *phases.PROCESS_PHASE.values(),
             *alerts.Budgets().phase_s}
    assert named <= sc.METRIC_PHASES <= set(sc.PHASES)


def test_of_several_processes_of_one_kind_the_slowest_counts():
    """Tensor-parallel workers: each process's phase total; /metrics (the whole start) serves the slowest."""
    def worker(rank: int, start_s: float, end_s: float) -> Span:
        s = span("Load weights", "weights_load", "worker", start_s, end_s, f"{rank + 7:02d}" * 8)
        return Span(s.trace_id, s.span_id, None, s.name, s.start, s.end, s.attrs, {"service.instance.id": f"w{rank}"})

    two = [worker(0, 0, 2), worker(0, 5, 6), worker(1, 0, 2.5)]
    [phase] = [o for o in span_observations(two, FLEET) if o.metric == PHASE_LAST]
    assert phase.value == pytest.approx(3.0)  # rank 0: 2 s + 1 s; rank 1: 2.5 s
    assert [o.value for o in span_observations(two[2:], FLEET) if o.metric == PHASE_LAST] == [2.5]  # its own


def test_whole_start_observations_carry_outcome_trace_and_causes():
    starts, last = start_observations(START, FLEET)
    assert starts.value == 1 and starts.labels[sc.OUTCOME] == "ready"
    assert last.value == 60 and last.labels[sc.OUTCOME] == "ready"
    assert last.labels[sc.TRACE_ID] == "ab" * 16
    assert last.labels[sc.COMPILE_CACHE_HIT] == "false"
    assert last.labels[sc.MODEL_INSPECTION_CACHE_HIT] == "true"
    assert last.labels[sc.WEIGHTS_SOURCE] == "hub_cache"
    assert start_observations(START[1:], FLEET) == []  # no root: not a start


def test_otlp_and_scrape_paths_report_the_same_numbers(metrics_reader):
    """The same observations through the OTel SDK and through the /metrics collector."""
    from opentelemetry import metrics

    from vllm_otel_startup.agent.export.otel_metrics import StartupRecorder, meter

    observations = span_observations(START, FLEET) + start_observations(START, FLEET)
    StartupRecorder(meter(metrics.get_meter_provider())).record(observations)
    otel = {}
    for rm in metrics_reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in m.data.data_points:
                    key = (sc.prom_name(m.name), tuple(sorted(
                        (sc.prom_label(k), v) for k, v in dp.attributes.items())))
                    otel[key] = dp.value
    registry = CollectorRegistry()
    registry.register(StartupCollector(lambda: START, FLEET))
    scraped = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for smp in fam.samples:
            scraped[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    assert set(otel) == set(scraped)
    for (name, labels), value in otel.items():
        assert scraped[(name, labels)] == pytest.approx(value), name
    assert len(otel) >= 10


def test_scraped_counters_carry_the_observed_span_as_an_openmetrics_exemplar():
    """/metrics in OpenMetrics (what Prometheus asks for): each counter series names its last observed span, the
    start's root for the starts counter; the plain text format has no exemplars and is unchanged."""
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    registry = CollectorRegistry()
    registry.register(StartupCollector(lambda: START, FLEET))
    root = START[0]
    exemplars = {}
    for fam in parse_openmetrics(openmetrics_latest(registry).decode()):
        for smp in fam.samples:
            if smp.exemplar is not None:
                exemplars.setdefault(smp.name, []).append(smp.exemplar.labels)
    starts = sc.prom_name("vllm.startup.starts")  # the counter's sample name (prom_name keeps `_total`)
    assert {"trace_id": root.trace_id, "span_id": root.span_id} in exemplars[starts]
    assert all(e["trace_id"] == root.trace_id for found in exemplars.values() for e in found)
    assert all(name.endswith("_total") for name in exemplars)  # counters only: gauges have none in OpenMetrics
    assert "# {" not in generate_latest(registry).decode()


def test_exemplars_point_at_the_observed_span(metrics_reader, start):
    """A real start's phase gauges keep the trace and span id of the span they observed."""
    s = start("worker", "0.33.0")
    importlib.import_module("vllm.v1.worker.gpu_worker").Worker().determine_available_memory()
    s.rt.finish()
    s.rt.sampler.join(5)
    [kv] = s.spans("KV cache profiling")
    exemplars: dict[str, list] = {}
    for batch in metrics_reader.exported:  # what the ready-point flush exported
        for rm in batch.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for dp in m.data.data_points if m.name == PHASE_LAST else ():
                        exemplars.setdefault(dp.attributes[sc.PHASE], []).extend(
                            (e.trace_id, e.span_id) for e in dp.exemplars)
    assert (kv.context.trace_id, kv.context.span_id) in exemplars["kv_cache_profile"]
    root = s.rt.process_span.get_span_context()
    assert (root.trace_id, root.span_id) in exemplars["worker_process"]


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


def test_spool_hands_a_childs_spans_to_the_api_server(otel, tmp_path, monkeypatch):
    provider, exporter = otel
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with provider.get_tracer("t").start_as_current_span("Load weights", attributes={sc.PHASE: "weights_load"}):
        pass
    [ended] = exporter.get_finished_spans()
    trace_id = f"{ended.context.trace_id:032x}"
    assert spool.write(trace_id, "worker-42", [ended])
    [back] = spool.read(trace_id)
    assert back == from_readable(ended) and back.name == "Load weights"
    spool.remove(trace_id)
    assert spool.read(trace_id) == []


def test_prometheus_multiprocess_mode_serves_what_the_root_wrote_once(tmp_path):
    """PROMETHEUS_MULTIPROC_DIR: /metrics is prometheus-client's MultiProcessCollector over that directory (vLLM's
    API servers and its Helm chart): the start's series are written there in files of our own, read back once."""
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    from vllm_otel_startup.agent.export.observations import Obs
    from vllm_otel_startup.agent.export.prometheus import write_multiprocess

    fleet = {sc.MODEL: "tiny", sc.OUTCOME: "ready"}
    obs = [Obs("vllm.startup.starts", 1, fleet), Obs("vllm.startup.last_start.duration", 12.5, fleet)]
    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    theirs = MmapedDict(str(tmp_path / "counter_4242.db"))  # a vLLM process's own file: never touched
    theirs.write_value(mmap_key("vllm:x", "vllm:x_total", [], [], "x"), 3.0, 0.0)
    theirs.close()
    before = (tmp_path / "counter_4242.db").read_bytes()
    assert write_multiprocess(obs, str(tmp_path)) == 2
    assert (tmp_path / "counter_4242.db").read_bytes() == before
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    text = generate_latest(registry).decode()
    assert text.count('vllm_startup_starts_total{vllm_model="tiny",vllm_startup_outcome="ready"} 1.0') == 1
    assert 'vllm_startup_last_start_duration_seconds{vllm_model="tiny",vllm_startup_outcome="ready"} 12.5' in text
