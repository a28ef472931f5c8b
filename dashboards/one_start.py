"""Dashboard 3: one start, drilled down — find slow or failed starts with TraceQL, open one trace, and read its
pod's resource fingerprint (CPU cores busy, resident memory, GPU memory, disk reads) over the start's time range.

Arrive here from the overview's slowest-starts table (it fills trace id, pod and time range), or paste a trace id:
the pod is looked up from that start's series. The fingerprint is sampled from process start until shortly after
ready, so its series mark the start's time range.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from vllm_otel_startup import semconv as sc

from . import panels as p
from . import promql as q
from . import vocabulary as v
from .fleet_overview import ONE_START_UID, TAG, dashboard_links
from .variables import RATE_INTERVAL

UID = ONE_START_UID
TITLE = "vLLM startup: one start"
TRACE_VAR, POD_VAR, MIN_DURATION_VAR = "trace_id", "pod", "min_duration"

# TraceQL over the span vocabulary: the root span, its attributes, our resource attributes.
_ROOT = f'name = "{sc.ROOT_SPAN}"'
_COLUMNS = f"resource.k8s.pod.name, span.{sc.MODEL}, span.{sc.OUTCOME}, span.{sc.MODE}, span.{sc.VLLM_VERSION}"
SLOW_STARTS = f"{{ {_ROOT} && duration > ${MIN_DURATION_VAR} }} | select({_COLUMNS})"
FAILED_STARTS = f'{{ {_ROOT} && span.{sc.OUTCOME} = "failed" }} | select({_COLUMNS})'
_NOT_PHASES = "|".join(("startup", "engine_core_process", "worker_process", "engine_wait", "worker_wait"))
SLOW_PHASES = (f'{{ span.{sc.PHASE} =~ ".+" && span.{sc.PHASE} !~ "{_NOT_PHASES}" && duration > ${MIN_DURATION_VAR} }}'
               f" | select(span.{sc.PHASE}, resource.{sc.PROCESS_KIND}, resource.k8s.pod.name)")
TRACEQL = (SLOW_STARTS, FAILED_STARTS, SLOW_PHASES)


def _variables() -> list:
    trace = (db.TextBoxVariable(TRACE_VAR).label("Trace id")
             .description("A start's trace id (32 hex digits); the overview's slowest-starts table links here."))
    pod = (db.QueryVariable(POD_VAR).label("Pod").datasource(p.PROM)
           .query(f"label_values({q.selector(v.LAST_START, [q.re(v.TRACE_ID, f'${TRACE_VAR}')])}, {v.POD})")
           .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).allow_custom_value(True)
           .description("The start's pod (from its trace id); type another to compare."))
    mins = ["30s", "60s", "120s", "300s", "600s"]
    min_duration = (db.CustomVariable(MIN_DURATION_VAR).label("Slower than").values(",".join(mins))
                    .current(dm.VariableOption(selected=True, text="60s", value="60s")))
    return [p.prometheus_variable(), p.tempo_variable(), trace, pod, min_duration]


def _tempo_table(title: str, description: str, query: str, w: int) -> db.Panel:
    return (db.Panel().type("table").title(title).description(description).datasource(p.TEMPO)
            .with_target(p.traceql(query)).span(w).height(8))


def build() -> db.Dashboard:
    pod = [q.re(v.POD, f"${POD_VAR}")]
    read = [*pod, q.eq(v.DISK_DIRECTION, v.READ)]
    d = (db.Dashboard(TITLE).uid(UID).tags([TAG]).time("now-6h", "now").refresh("")
         .description("One vLLM start: its trace and its resource fingerprint.")
         .links(dashboard_links()))
    for var in _variables():
        d = d.with_variable(var)

    d = d.with_row(p.row("Find a start (TraceQL)"))
    d = d.with_panel(_tempo_table("Slow starts", "Root spans longer than the chosen duration; open one to "
                                  "see its trace.", SLOW_STARTS, 9))
    d = d.with_panel(_tempo_table("Failed starts", "Root spans with outcome failed.", FAILED_STARTS, 7))
    d = d.with_panel(_tempo_table("Slow phases", "Phase spans (not process or waiting spans) longer than the chosen "
                                  "duration.", SLOW_PHASES, 8))

    d = d.with_row(p.row("The trace"))
    d = d.with_panel(db.Panel().type("traces").title("Trace $trace_id").datasource(p.TEMPO)
                     .description("Every process's phases of this start; span attributes carry the causes.")
                     .with_target(p.traceql(f"${TRACE_VAR}")).span(24).height(16))

    d = d.with_row(p.row("Resource fingerprint of pod $pod"))
    cores = f"rate({q.selector(v.CPU_TIME, pod)}[{RATE_INTERVAL}])"
    d = d.with_panel(p.timeseries_panel(
        "CPU cores busy", "CPU time per second of each process kind, and the sampled peaks: this process, its "
        "process tree and host cores > 50 % busy (startup is mostly CPU-bound).",
        [(q.agg("sum", [v.PROCESS_KIND], cores), f"{{{{{v.PROCESS_KIND}}}}}"),
         (q.agg("max", [v.PROCESS_KIND, v.CPU_SCOPE], q.selector(v.CPU_CORES, pod)),
          f"peak {{{{{v.CPU_SCOPE}}}}} ({{{{{v.PROCESS_KIND}}}}})")], "none"))
    d = d.with_panel(p.timeseries_panel(
        "Resident memory", "RSS of each process.",
        [(q.agg("sum", [v.PROCESS_KIND, v.PROCESS_PID], q.selector(v.MEMORY_USAGE, pod)),
          f"{{{{{v.PROCESS_KIND}}}}} {{{{{v.PROCESS_PID}}}}}")], "bytes"))
    d = d.with_panel(p.timeseries_panel(
        "GPU memory", "Used and total memory of each GPU (NVML; absent without a GPU).",
        [(q.agg("sum", [v.HW_ID, v.HW_NAME], q.selector(v.GPU_MEMORY_USAGE, pod)), f"used {{{{{v.HW_ID}}}}}"),
         (q.agg("max", [v.HW_ID, v.HW_NAME], q.selector(v.GPU_MEMORY_LIMIT, pod)), f"total {{{{{v.HW_ID}}}}}")],
        "bytes"))
    d = d.with_panel(p.timeseries_panel(
        "Disk read", "Bytes read from storage per second by each process kind (page-cache hits are not reads).",
        [(q.agg("sum", [v.PROCESS_KIND], f"rate({q.selector(v.DISK_IO, read)}[{RATE_INTERVAL}])"),
          f"{{{{{v.PROCESS_KIND}}}}}")], "Bps"))
    d = d.with_panel(p.timeseries_panel(
        "CPU throttling (cgroup)", "Seconds per second the container's cgroup was throttled: a CPU limit slows "
        "the start.", [(q.agg("sum", [v.POD], f"rate({q.selector(v.CGROUP_THROTTLED, pod)}[{RATE_INTERVAL}])"),
                        "throttled")], "percentunit"))
    d = d.with_panel(p.timeseries_panel(
        "GPU utilization", "Busy ratio of each GPU (NVML).",
        [(q.agg("max", [v.HW_ID, v.HW_NAME], q.selector(v.GPU_UTILIZATION, pod)), f"{{{{{v.HW_ID}}}}}")],
        "percentunit"))
    return d
