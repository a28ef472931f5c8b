"""Dashboard 1: fleet startup overview — how many starts, how long to ready, where the time goes, which starts
were slowest (each linked to its trace), and whether caches and weight storage do their job."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from . import panels as p
from . import phases as ph
from . import promql as q
from . import recording
from . import startup_queries as sq
from . import vocabulary as v
from .variables import HOUR, INTERVAL, RANGE, fleet_matchers, fleet_variables

UID = "vllm-startup-fleet"
TITLE = "vLLM startup: fleet overview"
TAG = "vllm-startup"
ONE_START_UID = "vllm-startup-one-start"
# Time series over recorded series: one point per evaluation is all there is
RECORDED_STEP = recording.INTERVALS[recording.GROUP]
PHASE_SELECTIONS = ("Phase panels follow only the vLLM version, device model and start mode selections "
                    "(dashboards/recording.py: phase series at every fleet label would cost the store more than the "
                    "starts they summarize).")

SLOWEST_COLUMNS = (v.TRACE_ID, v.CLUSTER, v.NAMESPACE, v.POD, v.MODEL, v.VLLM_VERSION, v.DEVICE_MODEL, v.MODE,
                   v.OUTCOME, v.COMPILE_CACHE_HIT, v.MODEL_INSPECTION_CACHE_HIT, v.WEIGHTS_SOURCE)


def one_start_url(trace_field: str = "${__value.raw}") -> str:
    """Link to dashboard 3 for one start (its trace and its pod's resource fingerprint)."""
    return (f"/d/{ONE_START_UID}/?var-{p.PROM_VAR}=${{{p.PROM_VAR}}}&var-{p.TEMPO_VAR}=${{{p.TEMPO_VAR}}}"
            f"&var-trace_id={trace_field}&var-pod=${{__data.fields.{v.POD}}}&${{__url_time_range}}")


def dashboard_links() -> list[db.DashboardLink]:
    return [db.DashboardLink("vLLM startup dashboards").type(dm.DashboardLinkType.DASHBOARDS).tags([TAG])
            .as_dropdown(True).include_vars(False).keep_time(True).target_blank(False).icon("external link")
            .tooltip("")]


def build() -> db.Dashboard:
    m = fleet_matchers()
    ready = [(sq.time_to_ready_quantile(qq, m, RANGE), f"p{int(qq * 100)}") for qq in (0.5, 0.95, 0.99)]
    d = (db.Dashboard(TITLE).uid(UID).tags([TAG]).time("now-24h", "now").refresh("5m")
         .description("Where a vLLM fleet's cold starts go: one series per start from vllm-otel-startup. "
                      "Windows count starts that happened in them (see dashboards/README.md).")
         .with_variable(p.prometheus_variable()).with_variable(p.tempo_variable()))
    for var in fleet_variables():
        d = d.with_variable(var)
    d = d.links(dashboard_links())

    d = d.with_row(p.row("Starts"))
    d = d.with_panel(p.stat_panel("Starts", "Starts in the time range (one vllm_startup_last_start series each).",
                                  [(sq.starts(m, RANGE), "starts")], "none", w=4, decimals=0))
    d = d.with_panel(p.stat_panel("Outcome", "Starts in the time range by outcome (failed starts arrive over OTLP "
                                  "only: a failed server never serves /metrics).",
                                  [(sq.starts(m, RANGE, [v.OUTCOME]), f"{{{{{v.OUTCOME}}}}}")], "none", w=6,
                                  decimals=0))
    d = d.with_panel(p.stat_panel("Time to ready", "API-server process creation to HTTP accepting, ready starts "
                                  "in the time range (histogram quantiles).", ready, "s", w=10))
    d = d.with_panel(p.stat_panel("Mean time to ready", "Mean over ready starts in the time range.",
                                  [(sq.mean_time_to_ready(m, RANGE), "mean")], "s", w=4))
    d = d.with_panel(p.timeseries_panel(
        "Starts per hour by outcome", "Starts in the hour before each point.",
        [(sq.starts(m, HOUR, [v.OUTCOME]), f"{{{{{v.OUTCOME}}}}}")], "none", interval=RECORDED_STEP))
    d = d.with_panel(p.timeseries_panel(
        "Starts with their traces", "Starts by outcome (the raw starts counter), with its exemplars where the "
        "store has them: each dot is one start, its trace_id opens the trace in Tempo. Prometheus keeps them with "
        "--enable-feature=exemplar-storage, over OTLP (the collector's remote write, Prometheus's OTLP receiver) or "
        "from a scrape of vLLM's /metrics/ (OpenMetrics; /metrics is plain text): deploy/README.md.",
        [(sq.start_exemplars(m, [v.OUTCOME]), f"{{{{{v.OUTCOME}}}}}")], "none", exemplars=True))
    d = d.with_panel(p.timeseries_panel(
        "Time to ready p50 / p95 / p99", "Ready starts in the hour before each point.",
        [(sq.time_to_ready_quantile(qq, m, HOUR), f"p{int(qq * 100)}") for qq in (0.5, 0.95, 0.99)], "s",
        interval=RECORDED_STEP))

    d = d.with_row(p.row("Where the time goes"))
    d = d.with_panel(p.timeseries_panel(
        "Phase breakdown (mean per start)",
        "Mean seconds per start of non-overlapping phases (dashboards/phases.py STACKED_PHASES; parallel workers "
        "count once), stacked; 'other' is the mean time to ready none of them covers. One bar per interval. "
        + PHASE_SELECTIONS,
        [(sq.phase_mean_per_process(m, INTERVAL, ph.STACKED_PHASES), f"{{{{{v.PHASE}}}}}"),
         (sq.unlisted_time(m, INTERVAL, ph.STACKED_PHASES), "other")],
        "s", w=16, h=10, stacked_bars=True, interval="1h"))
    d = d.with_panel(p.bargauge_panel(
        "Mean phase time over the range", "The same phases, mean per start over the whole time range. "
        + PHASE_SELECTIONS,
        [(sq.phase_mean_per_process(m, RANGE, ph.STACKED_PHASES), f"{{{{{v.PHASE}}}}}")], "s", w=8, h=10))

    d = d.with_panel(p.bargauge_panel(
        "Rank waits by phase (tensor / pipeline parallel)", "Starts with several workers per EngineCore: per leaf "
        "phase, the longest a rank waited for the slowest one to end it (the executor's next call waits for every "
        "rank). The start's report names the straggler rank (`ranks: ... ended last on worker N`).",
        [(sq.rank_waits(m, RANGE), f"{{{{{v.PHASE}}}}}")], "s", w=8, h=10))

    d = d.with_row(p.row("Slowest recent starts"))
    slowest = (p.table_panel(
        "Slowest starts", "The slowest starts of the time range with their causes; the trace id opens the start "
        "(trace and resource fingerprint).", [(sq.slowest_starts(m, RANGE, SLOWEST_COLUMNS), "")],
        transformations=[p.transformation("organize", {"excludeByName": {"Time": True},
                                                       "renameByName": {"Value": "time to ready"},
                                                       "indexByName": {c: i for i, c in enumerate(SLOWEST_COLUMNS)}})])
        .sort_by([cb.TableSortByFieldState().display_name("time to ready").desc(True)])
        .override_by_name("time to ready", [dm.DynamicConfigValue(id_val="unit", value="s")])
        .override_by_name(v.TRACE_ID, [dm.DynamicConfigValue(id_val="links", value=[
            {"title": "Open this start (trace + resource fingerprint)", "url": one_start_url()}])]))
    d = d.with_panel(slowest)

    d = d.with_row(p.row("Caches and weights"))
    d = d.with_panel(p.bargauge_panel(
        "Compile-cache hit ratio by model", "Share of torch.compile runs served from the compile cache.",
        [(sq.compile_hit_ratio(m, RANGE, [v.MODEL]), f"{{{{{v.MODEL}}}}}")], "percentunit", max_value=1))
    d = d.with_panel(p.bargauge_panel(
        "Compile-cache keys per model and version", "Distinct torch.compile cache keys in the time range: one "
        "per configuration that compiled. More than one for a model and version means restarts compiled afresh; "
        "the start's compile_key_changed advice (or compare of two starts) names the factor that differed.",
        [(sq.compile_keys(m, RANGE), f"{{{{{v.MODEL}}}}} {{{{{v.VLLM_VERSION}}}}}")], "short"))
    d = d.with_panel(p.bargauge_panel(
        "Modelinfo-cache hit ratio by model", "Share of starts whose model inspection came from "
        "$VLLM_CACHE_ROOT/modelinfos (no inspection subprocess).",
        [(sq.model_inspection_hit_ratio(m, RANGE, [v.MODEL]), f"{{{{{v.MODEL}}}}}")], "percentunit",
        max_value=1))
    d = d.with_panel(p.bargauge_panel(
        "Weights loaded by source", "Weight bytes loaded in the time range: hub_download means downloaded "
        "during the start.", [(sq.weights_bytes(m, RANGE, [v.WEIGHTS_SOURCE]), f"{{{{{v.WEIGHTS_SOURCE}}}}}")],
        "decbytes"))
    d = d.with_panel(p.timeseries_panel(
        "Weight load throughput by source (GB/s)", "Bytes over time spent in Load weights, starts of the hour "
        "before each point (10^9 bytes/s).", [(sq.weights_gbps(m, HOUR), f"{{{{{v.WEIGHTS_SOURCE}}}}}")],
        "none", w=16, interval=RECORDED_STEP))
    d = d.with_panel(p.bargauge_panel(
        "Weight GB/s by source over the range", "", [(sq.weights_gbps(m, RANGE), f"{{{{{v.WEIGHTS_SOURCE}}}}}")],
        "none"))
    return starting_now(d, m)


STARTING_KEYS = (v.CLUSTER, v.NAMESPACE, v.POD, v.MODEL, v.TRACE_ID)


def starting_now(d: db.Dashboard, m: list[str]) -> db.Dashboard:
    """Starts in flight right now (the in-progress series: each process reports them until its ready point)."""
    d = d.with_row(p.row("Starting now"))
    elapsed = sq.in_progress(v.IN_PROGRESS_ELAPSED, m, STARTING_KEYS, q.eq(v.PROCESS_KIND, v.API_SERVER))
    remaining = sq.in_progress(v.IN_PROGRESS_REMAINING, m, STARTING_KEYS)
    d = d.with_panel(p.table_panel(
        "Starting now", "Each start still in progress: time since its API server was created and the expected time "
        "to ready (from that node's recorded starts of the same model and configuration; empty: no such history).",
        [(elapsed, ""), (remaining, "")], w=10, h=8,
        transformations=p.merge_columns({"Value #A": "elapsed", "Value #B": "expected remaining"}))
        .override_by_name("elapsed", [dm.DynamicConfigValue(id_val="unit", value="s")])
        .override_by_name("expected remaining", [dm.DynamicConfigValue(id_val="unit", value="s")]))
    in_phase = sq.in_progress(v.IN_PROGRESS_PHASE_ELAPSED, m, [*STARTING_KEYS, v.PROCESS_KIND, v.PHASE])
    d = d.with_panel(p.table_panel(
        "Starting now: the phase of each process", "The innermost open phase of every process of each start in "
        "progress and how long it has been in it (engine_wait / worker_wait: the process waits for the next one).",
        [(in_phase, "")], w=14, h=8,
        transformations=[p.transformation("organize", {"excludeByName": {"Time": True},
                                                       "renameByName": {"Value": "in phase"}})])
        .sort_by([cb.TableSortByFieldState().display_name("in phase").desc(True)])
        .override_by_name("in phase", [dm.DynamicConfigValue(id_val="unit", value="s")]))
    return d
