"""vLLM's /metrics path of the startup metrics (agent/export/prometheus.py): names that follow the OTLP translation
rules, exemplars that point at the observed span, and prometheus_client's multiprocess mode serving what the root
wrote once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.observations import (
    fleet_labels,
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


def test_prometheus_names_follow_the_otlp_translation_rules():
    assert sc.prom_name("vllm.startup.phase.last_duration") == "vllm_startup_phase_last_duration_seconds"
    assert sc.prom_name("vllm.startup.starts") == "vllm_startup_starts_total"
    assert sc.prom_name("vllm.startup.weights.bytes") == "vllm_startup_weights_bytes_total"  # no bytes_bytes
    assert sc.prom_name("hw.gpu.utilization") == "hw_gpu_utilization_ratio"
    assert sc.prom_name("process.cpu.time") == "process_cpu_time_seconds_total"
    assert sc.prom_label(sc.PHASE) == "vllm_startup_phase"


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
