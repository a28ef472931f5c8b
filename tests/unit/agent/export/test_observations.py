"""Startup metrics: one derivation from spans, two export paths with the same numbers, exemplars that point
at the observed span, and a resource sampler that summarises each span and stops after ready."""

from __future__ import annotations

import importlib

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.observations import (
    PHASE_LAST,
    fleet_labels,
    label_value,
    span_observations,
    start_observations,
)
from vllm_otel_startup.agent.export.prometheus import StartupCollector
from vllm_otel_startup.model.spanmodel import Span

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


