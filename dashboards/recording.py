"""Recording rules: the fleet-wide "starts of the last hour" aggregations, evaluated by Prometheus or vmalert
once per interval instead of by every dashboard refresh, and the only way a fleet dashboard reads phases.

The startup metrics are one series per start and fact (semconv.STARTUP_METRICS: no histogram buckets), so a
question over many starts (a fleet's p95 of a phase over 7 days) would read every start's series: at 100,000
starts a week that is millions of series (docs/results.md "Fleet scale"). A recording rule reads only the
starts of its window (``new_in(series, 1h)``) and writes an aggregate whose series count depends on the fleet's
label combinations, not on its number of starts:

- ``count`` / ``sum`` of the new series, ``bucket``: how many of them are ``<=`` each bound (a cumulative
  histogram with ``le``, so ``histogram_quantile`` over their sum answers any selection of the kept labels),
  ``p95``: their 95th percentile;
- at a level (its ``keep`` labels; Prometheus' level:metric:operations naming): ``fleet`` keeps every label a
  fleet is selected by (cluster, namespace, ``semconv.FLEET_LABELS``, process kind) and the metric's own labels;
  ``phase`` keeps only vLLM version, device model, start mode, process kind and phase (about 50 phases per
  start: at the fleet level their buckets would outnumber the per-start series they summarize); ``model_phase``
  keeps cluster, model, process kind and phase (the alerts' per-model baselines: a typical hour's p95 is the
  median of the recorded hourly p95s, whatever the evaluation interval).

Reading them (startup_queries.py through ``lookup``): over the rule's own window, the recorded series as they
are (summed by any subset of the kept labels, with matchers on them); over a longer window (a dashboard's time
range) a ratio — a quantile, a mean, a hit ratio — sums the recorded series over that range
(``sum_over_time``): each start then weighs as much as every other (it is in as many evaluations), except the
starts of the range's first and last hour. Counts over a range read the per-start series (one per start).

``raw_queries()`` turns recording off (the same dashboards and alerts as if no rule existed): the proof on the
stores compares both forms.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from . import promql as q
from . import vocabulary as v

WINDOW = "1h"  # the sliding window of the per-hour panels (variables.HOUR) and of the alerts (Budgets.recent)
GROUP, PHASE_GROUP = "vllm-startup.recording", "vllm-startup.recording.phases"
# Every 4 minutes: a fleet panel's point and an alert over the last hour need no finer resolution, and a 7-day panel
# then reads 2,520 points per recorded series, not 10,080 (at 100,000 starts a week: 1 s or more per panel); under
# Prometheus' default 5-minute lookback, so the latest evaluation is always in sight.
INTERVALS = {GROUP: "4m", PHASE_GROUP: "4m"}
FLEET, PHASE, MODEL_PHASE = LEVELS = ("fleet", "phase", "model_phase")  # levels (module docstring)
# Labels a fleet is selected and grouped by (dashboards' fleet filters, alerts' groupings).
FLEET_KEEP: tuple[str, ...] = (v.CLUSTER, v.NAMESPACE, *v.FLEET_LABELS, v.PROCESS_KIND)
PHASE_KEEP: tuple[str, ...] = (v.VLLM_VERSION, v.DEVICE_MODEL, v.MODE, v.PROCESS_KIND, v.PHASE)
MODEL_PHASE_KEEP: tuple[str, ...] = (v.CLUSTER, v.MODEL, v.PROCESS_KIND, v.PHASE)
PER_START: frozenset[str] = frozenset({v.TRACE_ID})  # metric labels unique to one start: never kept
# Bucket bounds (s), from the recorded starts: time to ready 15 s to 30 min; phases 0.1 s to 1,000 s, 1-2-5 apart
# (50 ms imports to 150 s H100 compiles; x3 apart put a 28 s cold and a 14 s warm compile in one bucket). Alert
# budgets on quantiles are among them (exact comparisons).
READY_BOUNDS: tuple[str, ...] = ("15", "30", "45", "60", "90", "120", "180", "240", "300", "450", "600", "900",
                                 "1200", "1800", "+Inf")
PHASE_BOUNDS: tuple[str, ...] = ("0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000",
                                 "+Inf")
QUANTILE = 0.95  # of the p95 recordings


@dataclass(frozen=True)
class Recording:
    source: str  # the raw series (a name of vocabulary.allowed_series())
    op: str  # "count" (starts), "sum", "bucket" (with ``bounds``) or "p95"
    level: str = FLEET
    labels: tuple[str, ...] = ()  # the metric's own labels kept at the fleet level (default: all but per-start)
    bounds: tuple[str, ...] = ()
    window: str = WINDOW

    @property
    def record(self) -> str:
        return f"{self.level}:{self.source}:{self.op}_new{self.window}"

    @property
    def group(self) -> str:
        return GROUP if self.level == FLEET else PHASE_GROUP


    @property
    def keep(self) -> tuple[str, ...]:
        if self.level == PHASE:
            return PHASE_KEEP
        if self.level == MODEL_PHASE:
            return MODEL_PHASE_KEEP
        own = self.labels or tuple(sorted(v.allowed_series()[self.source] - v.IDENTITY_LABELS - set(v.FLEET_LABELS)
                                          - PER_START))
        return (*FLEET_KEEP, *own)

    @property
    def expr(self) -> str:
        new = q.new_in(self.source, self.window)
        if self.op == "bucket":
            return q.buckets(self.keep, new, self.bounds)
        if self.op == "p95":
            return q.agg("quantile", self.keep, new, f"{QUANTILE:g}")
        return q.agg(self.op, self.keep, new)

    def rule(self) -> dict:
        return {"record": self.record, "expr": self.expr}


RECORDINGS: tuple[Recording, ...] = (
    Recording(v.LAST_START, "count"),  # starts, with their outcome and causes
    Recording(v.LAST_START, "bucket", labels=(v.OUTCOME,), bounds=READY_BOUNDS),  # time to ready quantiles
    Recording(v.LAST_START, "sum", labels=(v.OUTCOME,)),  # mean time to ready (with the count)
    Recording(v.PHASE_LAST, "bucket", PHASE, bounds=PHASE_BOUNDS),  # phase quantiles
    Recording(v.PHASE_LAST, "sum", PHASE),  # phase means per start (with the count)
    Recording(v.PHASE_LAST, "count", PHASE),
    Recording(v.PHASE_LAST, "p95", MODEL_PHASE),  # alerts: a model's usual phase time
    Recording(v.WEIGHTS_BYTES, "sum"),  # weight bytes and GB/s by source
    Recording(v.WEIGHTS_LOAD_TIME, "sum"),
    Recording(v.COMPILES, "sum"),  # compile-cache misses
)
BY_RECORD: dict[str, Recording] = {r.record: r for r in RECORDINGS}

_enabled = True


@contextlib.contextmanager
def raw_queries() -> Iterator[None]:
    """Build dashboards and alerts as if no recording rule existed (every query on the raw series)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


_MATCHER = re.compile(r"\s*(\w+)\s*(=~|!~|!=|=)")


def matcher_labels(matchers: Iterable[str]) -> set[str]:
    return {_MATCHER.match(m).group(1) for m in matchers if m}


def lookup(source: str, op: str, labels: Iterable[str], matchers: Iterable[str], level: str = FLEET
           ) -> Recording | None:
    """The recording of ``op`` over ``source``'s new series at ``level`` that keeps ``labels`` and every label
    ``matchers`` select by, if any (None as well under ``raw_queries``)."""
    if not _enabled:
        return None
    needed = set(labels) | matcher_labels(matchers)
    for r in RECORDINGS:
        if (r.source, r.op, r.level) == (source, op, level) and needed <= set(r.keep):
            return r
    return None


def rule_groups() -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for r in RECORDINGS:
        groups.setdefault(r.group, []).append(r.rule())
    return [{"name": g, "interval": INTERVALS[g], "rules": rules} for g, rules in groups.items()]


def sources(series: Iterable[str]) -> set[str]:
    """Series names with recorded series replaced by the raw series they are computed from."""
    return {BY_RECORD[s].source if s in BY_RECORD else s for s in series}


def recorded_series(groups: list[dict]) -> dict[str, frozenset[str]]:
    """The series a rules file records, with their labels (its ``by`` grouping), for the vocabulary check:
    a query may select them only when the rules file defines them (tests/fleet/test_vocabulary.py)."""
    from . import promql_ast as ast

    out = {}
    for g in groups:
        for rule in g["rules"]:
            if "record" in rule:
                labels = ast.output_labels(rule["expr"])
                assert labels is not None, f"{rule['record']}: aggregate it (by ...)"
                out[rule["record"]] = labels
    return out

