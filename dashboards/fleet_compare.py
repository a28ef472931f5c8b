"""Dashboard 2: compare fleet A with fleet B — two independent selections (cluster, namespace, model, device
model, vLLM version, start mode) and every phase's p50 and p95 side by side with B − A, so "did the upgrade slow
compile?" or "are L40S nodes slower than H100 at loading?" is one glance."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from . import panels as p
from . import promql as q
from . import recording
from . import startup_queries as sq
from . import vocabulary as v
from .fleet_overview import PHASE_SELECTIONS, TAG, dashboard_links
from .variables import HOUR, RANGE, fleet_matchers, fleet_variables

UID = "vllm-startup-compare"
TITLE = "vLLM startup: compare fleets A vs B"
PHASE_VAR = "phase"
WEEK_STEP = "30m"  # the time series' resolution over the default 7 days: 336 points, each an hour's starts


def _phase_variable() -> db.QueryVariable:
    # from a recording (a handful of series per phase), not every start's phase series over 7 days
    counts = recording.lookup(v.PHASE_LAST, "count", [v.PHASE], [], recording.PHASE)
    return p.label_variable(PHASE_VAR, "Phases", q.selector(counts.record if counts else v.PHASE_LAST), v.PHASE)


def build() -> db.Dashboard:
    a, b = fleet_matchers("a_"), fleet_matchers("b_")
    only = [q.re(v.PHASE, f"${PHASE_VAR}")]
    d = (db.Dashboard(TITLE).uid(UID).tags([TAG]).time("now-7d", "now").refresh("")
         .description("Fleet A vs fleet B, phase by phase. B − A > 0: B is slower. Each side is a fleet selection; "
                      "All matches every value.")
         .with_variable(p.prometheus_variable()))
    for var in fleet_variables("a_", "A: ") + fleet_variables("b_", "B: ") + [_phase_variable()]:
        d = d.with_variable(var)
    d = d.links(dashboard_links())

    d = d.with_row(p.row("Whole start"))
    d = d.with_panel(p.stat_panel("Starts", "Starts in the time range.",
                                  [(sq.starts(a, RANGE), "A"), (sq.starts(b, RANGE), "B")], "none", w=4,
                                  decimals=0))
    for qq in (0.5, 0.95):
        pa, pb = sq.time_to_ready_quantile(qq, a, RANGE), sq.time_to_ready_quantile(qq, b, RANGE)
        d = d.with_panel(p.stat_panel(f"Time to ready p{int(qq * 100)}", "Ready starts in the time range.",
                                      [(pa, "A"), (pb, "B"), (f"{pb} - {pa}", "B − A")], "s", w=7))
    d = d.with_panel(p.stat_panel("Compile-cache hits", "Share of torch.compile runs served from the cache.",
                                  [(sq.compile_hit_ratio(a, RANGE), "A"), (sq.compile_hit_ratio(b, RANGE), "B")],
                                  "percentunit", w=6))
    d = d.with_panel(p.timeseries_panel(
        "Time to ready p95: A vs B", "Ready starts in the hour before each point.",
        [(sq.time_to_ready_quantile(0.95, a, HOUR), "A"), (sq.time_to_ready_quantile(0.95, b, HOUR), "B")], "s",
        interval=WEEK_STEP))
    d = d.with_panel(p.timeseries_panel(
        "Weight load throughput (GB/s): A vs B", "By weight source; starts in the hour before each point.",
        [(sq.weights_gbps(a, HOUR), f"A {{{{{v.WEIGHTS_SOURCE}}}}}"),
         (sq.weights_gbps(b, HOUR), f"B {{{{{v.WEIGHTS_SOURCE}}}}}")], "none", interval=WEEK_STEP))

    d = d.with_row(p.row("Phase by phase"))
    cols = {}
    targets = []
    for qq in (0.5, 0.95):
        pa = sq.phase_quantile(qq, a + only, RANGE)
        pb = sq.phase_quantile(qq, b + only, RANGE)
        n = int(qq * 100)
        for expr, name in ((pa, f"A p{n}"), (pb, f"B p{n}"), (f"{pb} - {pa}", f"B − A p{n}")):
            cols[f"Value #{chr(ord('A') + len(targets))}"] = name
            targets.append((expr, ""))
    d = d.with_panel(p.table_panel(
        "Phase durations: A vs B", "Each phase's time per start over the time range, from the recorded phase "
        f"buckets (tensor-parallel workers each count over OTLP). Phases nest: do not add rows up. {PHASE_SELECTIONS}",
        targets, w=24, h=14,
        transformations=p.merge_columns(cols)).unit("s"))
    d = d.with_panel(p.barchart_panel(
        "Phase p95: A vs B", PHASE_SELECTIONS, [(sq.phase_quantile(0.95, a + only, RANGE), ""),
                                  (sq.phase_quantile(0.95, b + only, RANGE), "")], "s", v.PHASE, h=14,
        transformations=p.merge_columns({"Value #A": "A p95", "Value #B": "B p95"})))
    d = d.with_panel(p.timeseries_panel(
        "Phase p95 over time: A vs B", "Pick phases above (e.g. torch_compile, weights_load); starts of the hour "
        f"before each point. {PHASE_SELECTIONS}",
        [(sq.phase_quantile(0.95, a + only, HOUR), f"A {{{{{v.PHASE}}}}}"),
         (sq.phase_quantile(0.95, b + only, HOUR), f"B {{{{{v.PHASE}}}}}")], "s", w=24, h=10, interval=WEEK_STEP))
    return d
