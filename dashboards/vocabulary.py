"""The only metric and label names dashboards and alerts may use, derived from the package's vocabulary.

- metrics and their labels: ``semconv.STARTUP_METRICS`` / ``RESOURCE_METRICS`` / ``LIVE_METRICS`` under their
  Prometheus names (``semconv.prom_name``), startup metrics with the fleet labels;
- identity labels: OpenTelemetry resource attributes as VictoriaMetrics names them (``service_name``,
  ``k8s_pod_name``, ...; OTLP path) and the scrape target's labels (``job``, ``instance``). The deploy's
  Prometheus scrape relabels Kubernetes meta labels to the same ``k8s_*`` names, so one query serves both paths;
- an explicit allowlist of kube-state-metrics series, for pod readiness (not ours: their names are KSM's).

``allowed_series()`` is what tests/fleet/test_vocabulary.py checks every query against.
"""

from __future__ import annotations

from vllm_otel_startup import semconv as sc

label = sc.prom_label


def _metric(name: str) -> str:
    return sc.prom_name(name)


def _k8s(attribute: str) -> str:
    assert attribute in sc.K8S_ENV, attribute  # a resource attribute our distro sets
    return label(attribute)


# --- startup metrics ------------------------------------------------------------------------------------
PHASE_LAST = _metric("vllm.startup.phase.last_duration")  # gauge: one series per phase and start
STARTS = _metric("vllm.startup.starts")
COMPILES = _metric("vllm.startup.compiles")
COMPILE_KEYS = _metric("vllm.startup.compile_keys")  # counter: one series per compile-cache key
WEIGHTS_BYTES = _metric("vllm.startup.weights.bytes")
WEIGHTS_LOAD_TIME = _metric("vllm.startup.weights.load_time")
RANK_WAIT = _metric("vllm.startup.rank_wait")  # gauge: a start's longest waits for its straggler rank, by phase
LAST_START = _metric("vllm.startup.last_start.duration")  # gauge: one series per start, with its trace id and time

# --- a start in progress (gauges, until each process's ready point) ---------------------------------------
IN_PROGRESS_ELAPSED = _metric("vllm.startup.in_progress.elapsed")
IN_PROGRESS_PHASE_ELAPSED = _metric("vllm.startup.in_progress.phase_elapsed")
IN_PROGRESS_REMAINING = _metric("vllm.startup.in_progress.remaining")
IN_PROGRESS: frozenset[str] = frozenset({IN_PROGRESS_ELAPSED, IN_PROGRESS_PHASE_ELAPSED, IN_PROGRESS_REMAINING})

# --- resource fingerprint (OTLP only) --------------------------------------------------------------------
CPU_TIME = _metric("process.cpu.time")
MEMORY_USAGE = _metric("process.memory.usage")
DISK_IO = _metric("process.disk.io")
CPU_CORES = _metric("vllm.startup.cpu.cores")
CGROUP_THROTTLED = _metric("vllm.startup.cgroup.cpu.throttled_time")
GPU_MEMORY_USAGE = _metric("hw.gpu.memory.usage")
GPU_MEMORY_LIMIT = _metric("hw.gpu.memory.limit")
GPU_UTILIZATION = _metric("hw.gpu.utilization")


# --- metric labels ---------------------------------------------------------------------------------------
OUTCOME = label(sc.OUTCOME)
PHASE = label(sc.PHASE)
PROCESS_KIND = label(sc.PROCESS_KIND)
COMPILE_CACHE_HIT = label(sc.COMPILE_CACHE_HIT)
COMPILE_CACHE_KEY = label(sc.COMPILE_CACHE_KEY)
MODEL_INSPECTION_CACHE_HIT = label(sc.MODEL_INSPECTION_CACHE_HIT)
WEIGHTS_SOURCE = label(sc.WEIGHTS_SOURCE)
TRACE_ID = label(sc.TRACE_ID)
CPU_SCOPE = label(sc.CPU_SCOPE)
DISK_DIRECTION = label(sc.DISK_IO_DIRECTION)
HW_ID = label(sc.HW_ID)
HW_NAME = label(sc.HW_NAME)
LE = "le"

# fleet labels (every startup metric)
MODEL = label(sc.MODEL)
VLLM_VERSION = label(sc.VLLM_VERSION)
DEVICE = label(sc.DEVICE)
DEVICE_MODEL = label(sc.DEVICE_MODEL)
TENSOR_SIZE = label(sc.TP_SIZE)
PIPELINE_SIZE = label(sc.PP_SIZE)
MODE = label(sc.MODE)
COMPILE_MODE = label(sc.COMPILATION_MODE)
FLEET_LABELS: tuple[str, ...] = tuple(label(x) for x in sc.FLEET_LABELS)

# --- identity labels (resource attributes over OTLP; relabelled target labels over a scrape) ---------------
CLUSTER = _k8s("k8s.cluster.name")
NAMESPACE = _k8s("k8s.namespace.name")
POD = _k8s("k8s.pod.name")
NODE = _k8s("k8s.node.name")
SERVICE_NAME = label("service.name")
PROCESS_PID = label("process.pid")
JOB, INSTANCE = "job", "instance"  # Prometheus target labels
IDENTITY_LABELS: frozenset[str] = frozenset(
    {label(a) for a in sc.K8S_ENV} | {SERVICE_NAME, PROCESS_PID, PROCESS_KIND, JOB, INSTANCE})
# One start = one pod's start: what per-start alerts group by (a restarted container is a new start of the pod).
START_KEYS: tuple[str, ...] = (CLUSTER, NAMESPACE, POD)

# --- label values (documented in docs/telemetry.md, metrics.md; semconv names them only in comments) -------
READY, FAILED = "ready", "failed"  # vllm.startup.outcome (also "exited": left before ready without error)
TRUE, FALSE = "true", "false"  # cache-hit labels
HUB_DOWNLOAD = "hub_download"  # vllm.weights.source (also local_dir, hub_cache, ...)
READ = "read"  # disk.io.direction
API_SERVER, ENGINE_CORE, WORKER = "api_server", "engine_core", "worker"  # vllm.startup.process_kind
CPU_SCOPES = ("process", "tree", "system")  # vllm.startup.cpu.scope
LABEL_VALUES: dict[str, tuple[str, ...]] = {
    OUTCOME: (READY, FAILED, "exited"),
    COMPILE_CACHE_HIT: (TRUE, FALSE),
    WEIGHTS_SOURCE: ("local_dir", "hub_cache", HUB_DOWNLOAD),
    PROCESS_KIND: (API_SERVER, ENGINE_CORE, WORKER),
    CPU_SCOPE: CPU_SCOPES,
    DISK_DIRECTION: (READ, "write"),
    MODE: ("cold", "warm"),
}
# Cause labels of vllm.startup.last_start.duration: empty when the start did not reach that phase (an eager
# start has no compile), so a result series may lack them.
MAY_BE_EMPTY: frozenset[str] = frozenset({COMPILE_CACHE_HIT, MODEL_INSPECTION_CACHE_HIT, WEIGHTS_SOURCE})

# --- kube-state-metrics allowlist (pod readiness; KSM's names and labels, not ours) ----------------------
KSM_NAMESPACE, KSM_POD, KSM_CONTAINER = "namespace", "pod", "container"
KSM_SERIES: dict[str, tuple[str, ...]] = {
    "kube_pod_created": (),  # pod creation time (unix s)
    "kube_pod_status_ready_time": (),  # time the pod passed its readiness probe (unix s)
    "kube_pod_container_info": (KSM_CONTAINER, "image", "image_id", "container_id"),
    "kube_pod_container_status_restarts_total": (KSM_CONTAINER,),
}
KSM_COMMON_LABELS = (KSM_NAMESPACE, KSM_POD, "uid", JOB, INSTANCE)
KSM_CREATED, KSM_READY_TIME, KSM_CONTAINER_INFO, KSM_RESTARTS = KSM_SERIES


def allowed_series() -> dict[str, frozenset[str]]:
    """Every series name a query may select, with the labels it may carry."""
    out: dict[str, frozenset[str]] = {}
    for name, (_kind, _unit, labels, _doc) in sc.METRICS.items():
        own = {label(x) for x in labels} | IDENTITY_LABELS
        if name in sc.STARTUP_METRICS or name in sc.LIVE_METRICS:
            own |= set(FLEET_LABELS)
        out[sc.prom_name(name)] = frozenset(own)
    for name, labels in KSM_SERIES.items():
        out[name] = frozenset(labels + KSM_COMMON_LABELS)
    return out
