"""Startup metrics of a real `opentelemetry-instrument vllm serve` on two real paths: OTLP from every process
through the collector (rotel) into VictoriaMetrics, and Prometheus scraping the running server's own
GET /metrics. Both are asserted on what the stores answer, against the spans of the same start."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

from vllm_otel_startup import semconv as sc

pytestmark = pytest.mark.e2e
PHASE, KIND = sc.prom_label(sc.PHASE), sc.prom_label(sc.PROCESS_KIND)


def vm(backends, obs, metric: str, extra: str = "") -> list[dict]:
    return backends.vm_query(f'{metric}{{k8s_pod_name="{obs.start.name}"{extra}}}')


def prom(backends, obs, metric: str, extra: str = "") -> list[dict]:
    return backends.prom_query(f'{metric}{{k8s_pod_name="{obs.start.name}"{extra}}}', at=obs.start.scraped_at)


def by_phase(series: list[dict]) -> dict[tuple[str, str], float]:
    return {(s["metric"][PHASE], s["metric"][KIND]): float(s["value"][1]) for s in series}


def span_totals(obs) -> dict[tuple[str, str], float]:
    total: dict[tuple[str, str], float] = defaultdict(float)
    for s in obs.file_spans():
        if s.attrs.get(sc.PHASE) in sc.METRIC_PHASES:  # the phases with a metric; the rest is trace detail
            total[(s.attrs[sc.PHASE], s.attrs[sc.PROCESS_KIND])] += s.duration
    return total


@pytest.mark.parametrize("which", ["eager", "compiled_cold"])
def test_each_phase_is_one_series_holding_its_spans_duration_on_both_paths(which, request, backends):
    """Same numbers, two paths: for every (phase, process kind), one series per start in VictoriaMetrics (OTLP
    from the process that ran it) and in Prometheus (the API server's /metrics, fed by the EngineCore's and
    worker's spool), holding the time of that phase's spans in the start's trace (one process per kind here), for
    every phase of semconv.METRIC_PHASES the start ran."""
    obs = request.getfixturevalue(which)
    total = span_totals(obs)
    name = sc.prom_name("vllm.startup.phase.last_duration")
    for path, query in (("otlp", vm), ("scrape", prom)):
        series = query(backends, obs, name)
        values = by_phase(series)
        assert len(values) == len(series) and set(values) == set(total), (path, sorted(set(total) ^ set(values)))
        for key, seconds in total.items():
            assert values[key] == pytest.approx(seconds, abs=1e-6), (path, key)
    kinds = {k for _, k in total}
    assert kinds == {"api_server", "engine_core", "worker"}


def test_whole_start_duration_outcome_and_trace_link(eager, backends):
    root = eager.root
    for query in (vm, prom):
        [n] = query(backends, eager, sc.prom_name("vllm.startup.starts"))
        assert float(n["value"][1]) == 1 and n["metric"][sc.prom_label(sc.OUTCOME)] == "ready"
        [last] = query(backends, eager, sc.prom_name("vllm.startup.last_start.duration"))
        assert last["metric"][sc.TRACE_ID] == root.trace_id
        assert last["metric"][sc.prom_label(sc.OUTCOME)] == "ready"
        assert last["metric"][sc.prom_label(sc.WEIGHTS_SOURCE)] == "local_dir"
        assert last["metric"][sc.prom_label(sc.MODEL_INSPECTION_CACHE_HIT)] == "false"
        assert float(last["value"][1]) == pytest.approx(root.duration, abs=2e-6)  # the store keeps µs: two ends rounded
    # the starts counter's exemplar, scraped in OpenMetrics from vLLM's /metrics: the dots of the fleet overview's
    # "Starts with their traces", each opening its start's trace (VictoriaMetrics stores no exemplars)
    stored = backends.prom_exemplars(f'{sc.prom_name("vllm.startup.starts")}{{k8s_pod_name="{eager.start.name}"}}',
                                     root.start / 1e9 - 60, eager.start.scraped_at + 60)
    assert {e["labels"]["trace_id"] for series in stored for e in series["exemplars"]} == {root.trace_id}, stored


@pytest.mark.parametrize("which", ["eager", "compiled_cold"])
def test_a_start_costs_each_store_at_most_100_series(which, request, backends):
    """Issue 18's budget on the real stores: every series the start created — startup metrics, resource
    fingerprint and in-progress gauges of every process over OTLP; the startup metrics on /metrics."""
    obs = request.getfixturevalue(which)
    pod = f'k8s_pod_name="{obs.start.name}"'
    [otlp] = backends.vm_query(f"count(last_over_time({{{pod}}}[1d]))")
    [scraped] = backends.prom_query(f'count({{__name__=~"vllm_startup_.+", {pod}}})', at=obs.start.scraped_at)
    phases = len(span_totals(obs))
    assert phases + 3 <= int(scraped["value"][1]) <= int(otlp["value"][1]) <= 100, (phases, scraped, otlp)


def test_fleet_labels_agree_across_processes(eager, backends, tiny_model):
    series = vm(backends, eager, sc.prom_name("vllm.startup.phase.last_duration"))
    fleet = {tuple((k, s["metric"].get(sc.prom_label(k), "")) for k in sc.FLEET_LABELS) for s in series}
    assert len(fleet) == 1, fleet  # the EngineCore and worker carry the API server's values
    labels = dict(next(iter(fleet)))
    assert labels[sc.MODEL] == tiny_model.name  # the model's name, never its path
    assert labels[sc.VLLM_VERSION].startswith("0.32.0")
    assert labels[sc.DEVICE] == "cpu" and labels[sc.DEVICE_MODEL]
    assert labels[sc.TP_SIZE] == "1" and labels[sc.MODE] == "cold" and labels[sc.COMPILATION_MODE] == "NONE"


def test_compile_cache_miss_then_hit_and_weights(compiled_cold, compiled_warm, backends, tiny_model):
    hit = sc.prom_label(sc.COMPILE_CACHE_HIT)
    for obs, expected in ((compiled_cold, "false"), (compiled_warm, "true")):
        for query in (vm, prom):
            series = query(backends, obs, sc.prom_name("vllm.startup.compiles"))
            assert {s["metric"][hit]: float(s["value"][1]) for s in series}.get(expected, 0) >= 1, series
    [w] = vm(backends, compiled_cold, sc.prom_name("vllm.startup.weights.bytes"))
    assert float(w["value"][1]) == (tiny_model / "model.safetensors").stat().st_size
    [t] = prom(backends, compiled_cold, sc.prom_name("vllm.startup.weights.load_time"))
    assert float(t["value"][1]) == pytest.approx(compiled_cold.one("Load weights").duration, abs=1e-6)


def test_resource_fingerprint_from_every_process(eager, backends):
    """Sampled CPU, memory and disk of each process, the tree and the host: OTLP only, and no GPU series
    on a host without one (absent, not an error)."""
    cpu = vm(backends, eager, sc.prom_name("process.cpu.time"))
    assert {s["metric"][KIND] for s in cpu} == {"api_server", "engine_core", "worker"}
    assert {s["metric"][sc.prom_label(sc.CPU_MODE)] for s in cpu} == {"user", "system"}
    rss = vm(backends, eager, sc.prom_name("process.memory.usage"))
    assert all(float(s["value"][1]) > 100e6 for s in rss) and len(rss) == 3
    cores = vm(backends, eager, sc.prom_name("vllm.startup.cpu.cores"))
    scopes = {s["metric"][sc.prom_label(sc.CPU_SCOPE)] for s in cores}
    assert scopes == {"process", "tree", "system"}
    assert vm(backends, eager, sc.prom_name("process.disk.io"))
    assert vm(backends, eager, sc.prom_name("hw.gpu.memory.usage")) == []
    assert "/vllm_otel_startup/" not in eager.start.log  # no traceback through our code


def test_each_phase_span_carries_its_resource_summary(eager, backends):
    """The startup is CPU-bound: the spawn re-imports keep one core busy, sampled once a second while a process
    imports (its critical path: each tick takes the GIL from it); the API server's whole tree did more CPU work than
    the API server alone; the process span's CPU time matches the sampled metric."""
    for kind in ("api_server", "engine_core", "worker"):
        [imports] = [s for s in eager.named(sc.IMPORTS_SPAN) if s.attrs[sc.PROCESS_KIND] == kind]
        a = imports.attrs
        assert a[sc.RES_CPU_TIME] > 1.0 and 0.3 < a[sc.RES_CORES_AVG] <= 1.2, (kind, a)
        seconds = (imports.end - imports.start) / 1e9
        assert 1 <= a[sc.RES_SAMPLES] <= seconds + 1, (kind, a, seconds)  # a tick a second, not ten
        assert a[sc.RES_RSS_PEAK] > 100e6
        assert a[sc.RES_CORES_AVG] <= a[sc.RES_CORES_PEAK] <= 1.15 * (os.cpu_count() or 1)  # 1 s windows
        assert sc.RES_DISK_READ in a
    root = eager.root.attrs
    assert root[sc.RES_TREE_CPU_TIME] > root[sc.RES_CPU_TIME] + 5  # EngineCore and worker did CPU work too
    # host cores > 50 % busy in the busiest interval: at least the one a CPU-bound start keeps busy, at most the
    # cores this host has (the same claim on a 2-core CI machine and a 16-core GPU host)
    assert 1 <= root[sc.RES_SYSTEM_CORES_BUSY_PEAK] <= (os.cpu_count() or 1)
    worker = eager.one(sc.WORKER_PROCESS_SPAN).attrs[sc.RES_CPU_TIME]
    sampled = sum(float(s["value"][1]) for s in vm(backends, eager, sc.prom_name("process.cpu.time"),
                                                      f',{KIND}="worker"'))
    assert sampled >= worker - 0.05  # the metric's last reading is after ready
    assert sampled <= worker + 3.0  # ... by at most the sampling tail
