"""One ready start's series, shaped as each store holds them per docs/metrics.md — a stand-in for
real data until the end-to-end proof runs the same queries after a real start.

- ``otlp``: what VictoriaMetrics makes of OTLP: one series set per process (resource attributes as labels:
  ``service_name``, ``process_pid``, ``vllm_startup_process_kind``, ``k8s_*``), plus the resource fingerprint.
- ``scrape``: what Prometheus gets from the API server's /metrics: the whole start's phases in one series set
  per pod (every process kind, labelled by ``vllm_startup_process_kind``), target labels relabelled to ``k8s_*``,
  no resource fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterator

from dashboards import phases as ph
from dashboards import vocabulary as v
from vllm_otel_startup import semconv as sc

IDENTITY = {v.CLUSTER: "c1", v.NAMESPACE: "ns", v.POD: "vllm-0", v.NODE: "node-1"}
FLEET = {v.MODEL: "tiny", v.VLLM_VERSION: "0.32.0", v.DEVICE: "cpu", v.DEVICE_MODEL: "Xeon", v.TENSOR_SIZE: "1",
         v.PIPELINE_SIZE: "1", sc.prom_label(sc.DP_SIZE): "1", v.MODE: "cold", v.COMPILE_MODE: "NONE"}
PIDS = {v.API_SERVER: 100, v.ENGINE_CORE: 200, v.WORKER: 300}
PHASES_BY_KIND = {v.API_SERVER: ("interpreter_start", "imports", "cli", "config", "model_inspection", "tokenizer",
                                 "engine_wait", "http_startup"),
                  v.ENGINE_CORE: ("interpreter_start", "imports", "engine_init"),
                  v.WORKER: ("interpreter_start", "imports", "device_init", "weights_load", "kv_cache_profile",
                             "kv_cache_allocate")}
START_S = 55.0
Sample = tuple[str, dict[str, str], float]


def _start(process_labels: dict[str, dict[str, str]]) -> Iterator[Sample]:
    """The startup metrics; ``process_labels``: kind -> the labels that identify that kind's series."""
    for kind, own in process_labels.items():
        labels = {**own, **FLEET}
        yield v.PHASE_LAST, {**labels, v.PHASE: ph.PROCESS_PHASE[kind], v.PROCESS_KIND: kind}, START_S - 5
        for phase in PHASES_BY_KIND[kind]:
            yield v.PHASE_LAST, {**labels, v.PHASE: phase, v.PROCESS_KIND: kind}, 2.0
    api = {**process_labels[v.API_SERVER], **FLEET}
    yield v.STARTS, {**api, v.OUTCOME: v.READY}, 1
    yield v.LAST_START, {**api, v.OUTCOME: v.READY, v.TRACE_ID: "4bf92f3577b34da6a3ce929d0e0e4736",
                         v.COMPILE_CACHE_HIT: "", v.MODEL_INSPECTION_CACHE_HIT: v.FALSE,
                         v.WEIGHTS_SOURCE: "local_dir"}, START_S
    worker = {**process_labels[v.WORKER], **FLEET}
    yield v.WEIGHTS_BYTES, {**worker, v.WEIGHTS_SOURCE: "local_dir"}, 2e6
    yield v.WEIGHTS_LOAD_TIME, {**worker, v.WEIGHTS_SOURCE: "local_dir"}, 0.01


def otlp() -> list[Sample]:
    own = {kind: {**IDENTITY, v.SERVICE_NAME: "vllm", v.PROCESS_KIND: kind, v.PROCESS_PID: str(pid)}
           for kind, pid in PIDS.items()}
    out = list(_start(own))
    for labels in own.values():
        out += [(v.CPU_TIME, {**labels, sc.prom_label(sc.CPU_MODE): "user"}, 10.0),
                (v.MEMORY_USAGE, labels, 1e9),
                (v.DISK_IO, {**labels, v.DISK_DIRECTION: v.READ}, 1e8),
                (v.CPU_CORES, {**labels, v.CPU_SCOPE: "process"}, 1.0)]
    out.append((v.CGROUP_THROTTLED, own[v.API_SERVER], 0.5))
    return out


def scrape() -> list[Sample]:
    target = {**IDENTITY, v.JOB: "vllm", v.INSTANCE: "10.0.0.5:8000"}
    return list(_start({kind: target for kind in PIDS}))


def exposition(samples: list[Sample], start_s: int, end_s: int, *, openmetrics: bool, step_s: int = 15) -> str:
    """Every sample repeated every ``step_s`` from ``start_s`` (a start's series as stored after it got ready):
    OpenMetrics (timestamps in s, ``# EOF``: promtool's backfill) or Prometheus text (ms: VictoriaMetrics'
    import). Series of one name stay together."""
    lines = []
    for name, labels, value in sorted(samples, key=lambda x: (x[0], sorted(x[1].items()))):
        body = ",".join(f'{k}="{val}"' for k, val in sorted(labels.items()))
        lines += [f"{name}{{{body}}} {value:g} {t if openmetrics else t * 1000}" for t in range(start_s, end_s, step_s)]
    return "\n".join(lines) + ("\n# EOF\n" if openmetrics else "\n")
