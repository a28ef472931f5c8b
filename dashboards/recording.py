"""Recording rules: the fleet-wide "starts of the last hour" aggregations, evaluated once per minute by
Prometheus or vmalert instead of by every dashboard refresh.

A time-series panel over a 1h sliding window (starts per hour, time to ready p95 over time, GB/s per hour, ...)
recomputes ``new_in(series, 1h)`` over every start's histogram buckets at each of its points (a 7-day panel at a
1-minute step: ~10 000 evaluations per refresh), and so does every alert evaluation. A recording rule does it
once per evaluation interval, aggregated to the fleet: ``sum by (<fleet labels>) (new_in(series, 1h))`` keeps
the labels a fleet is selected by (cluster, namespace, ``semconv.FLEET_LABELS``, process kind) and the metric's
own labels, and drops the per-start ones (pod, node, pid, trace id). Summing the recorded series by any subset
of those labels, with matchers on them, gives exactly what the raw query gives (``count`` of new series becomes
``sum`` of the recorded counts).

startup_queries.py reads a recorded series wherever one answers the question (``lookup``: same series, same
window, every grouping and matcher label kept); everything else (instant panels over the dashboard's range,
per-start alerts) reads the raw series. Adding a recording is one ``Recording`` entry in ``RECORDINGS``; the
dashboards and alerts that can use it switch to it on the next ``python -m dashboards.generate``.

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
GROUP = "vllm-startup.recording"
INTERVAL = "1m"
LEVEL = "fleet"  # level:metric:operations (Prometheus' recording-rule naming): aggregated to the fleet labels
# Labels a fleet is selected and grouped by (dashboards' fleet filters, alerts' groupings).
FLEET_KEEP: tuple[str, ...] = (v.CLUSTER, v.NAMESPACE, *v.FLEET_LABELS, v.PROCESS_KIND)
PER_START: frozenset[str] = frozenset({v.TRACE_ID})  # metric labels unique to one start: never kept


@dataclass(frozen=True)
class Recording:
    source: str  # the raw series (a name of vocabulary.allowed_series())
    op: str  # how startup_queries aggregates it: "sum" (counters, gauges, histogram buckets) or "count" (starts)
    window: str = WINDOW

    @property
    def record(self) -> str:
        return f"{LEVEL}:{self.source}:{self.op}_new{self.window}"

    @property
    def keep(self) -> tuple[str, ...]:
        own = v.allowed_series()[self.source] - v.IDENTITY_LABELS - set(v.FLEET_LABELS) - PER_START
        return (*FLEET_KEEP, *sorted(own))

    @property
    def expr(self) -> str:
        return q.agg(self.op, self.keep, q.new_in(self.source, self.window))

    def rule(self) -> dict:
        return {"record": self.record, "expr": self.expr}


RECORDINGS: tuple[Recording, ...] = (
    Recording(v.LAST_START, "count"),  # starts
    Recording(v.bucket(v.DURATION), "sum"),  # time to ready quantiles
    Recording(v.bucket(v.PHASE_DURATION), "sum"),  # phase quantiles
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


def lookup(source: str, op: str, window: str, labels: Iterable[str], matchers: Iterable[str]) -> Recording | None:
    """The recording that answers ``op by (labels) (new_in(source{matchers}, window))``, if any."""
    if not _enabled:
        return None
    needed = set(labels) | {_MATCHER.match(m).group(1) for m in matchers if m}
    for r in RECORDINGS:
        if (r.source, r.op, r.window) == (source, op, window) and needed <= set(r.keep):
            return r
    return None


def rule_groups() -> list[dict]:
    return [{"name": GROUP, "interval": INTERVAL, "rules": [r.rule() for r in RECORDINGS]}]


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

