"""The startup questions dashboards and alerts ask, as PromQL over the metric vocabulary.

Each function takes ``matchers`` (which starts: a fleet selection) and ``window`` (starts that happened in the
last ``window``, see promql.new_in) and returns one expression whose result labels are exactly ``labels``
(plus those named in the docstring).

Aggregations over many starts go through ``_over_new`` / ``_buckets``: where a recording rule (recording.py)
holds the aggregation, the query reads the recorded series instead of every start's (over the rule's own window
as they are; over a longer one, for ratios, summed over time). Phase questions read the ``phase`` level, which
keeps vLLM version, device model, start mode, process kind and phase: the other fleet selections (cluster,
namespace, model, ...) do not apply to them (``phase_matchers``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import phases as ph
from . import promql as q
from . import recording
from . import vocabulary as v
from .variables import INTERVAL

Matchers = Sequence[str]


def _new(metric: str, matchers: Matchers, window: str, *extra: str) -> str:
    return q.new_in(q.selector(metric, [*matchers, *extra]), window)


def _recorded(rec: recording.Recording, labels: Sequence[str], matchers: Sequence[str], window: str) -> str:
    """The recorded series over the rule's own window or, summed over time, over a longer one."""
    sel = q.selector(rec.record, matchers)
    return q.agg("sum", labels, sel if window == rec.window else f"sum_over_time({sel}[{window}])")


def _over_new(op: str, labels: Sequence[str], metric: str, matchers: Matchers, window: str, *extra: str,
              ratio: bool = False, level: str = recording.FLEET) -> str:
    """``op by (labels)`` over the series new in ``window``: from a recording rule's series where one holds it
    (a count of series is then a sum of recorded counts), else from the raw series. ``ratio``: the result is one
    side of a ratio, so a recording may answer a longer window than its own (weighted, recording.py)."""
    rec = recording.lookup(metric, op, labels, [*matchers, *extra], level)
    if rec is not None and (window == rec.window or ratio):
        return _recorded(rec, labels, [*matchers, *extra], window)
    return q.agg(op, labels, _new(metric, matchers, window, *extra))


def _buckets(metric: str, bounds: Sequence[str], labels: Sequence[str], matchers: Matchers, window: str,
             *extra: str, level: str = recording.FLEET) -> str:
    """Cumulative bucket counts (``le``) of the new series' values, by ``labels``: for histogram_quantile."""
    rec = recording.lookup(metric, "bucket", labels, [*matchers, *extra], level)
    if rec is not None:
        return _recorded(rec, ["le", *labels], [*matchers, *extra], window)
    return q.agg("sum", ["le", *labels], q.buckets(labels, _new(metric, matchers, window, *extra), bounds))


def phase_matchers(matchers: Matchers) -> list[str]:
    """The fleet selections a phase question can apply: those on labels the ``phase`` level keeps."""
    return [m for m in matchers if recording.matcher_labels([m]) <= set(recording.PHASE_KEEP)]


def starts(matchers: Matchers, window: str, labels: Sequence[str] = (), *extra: str, ratio: bool = False) -> str:
    """Number of starts (one ``last_start`` series per start)."""
    return _over_new("count", labels, v.LAST_START, matchers, window, *extra, ratio=ratio)


def rank_waits(matchers: Matchers, window: str) -> str:
    """Tensor / pipeline parallel: per leaf phase, the longest time ranks waited for their straggler in a start of
    the window."""
    return _over_new("max", [v.PHASE], v.RANK_WAIT, matchers, window)


def start_exemplars(matchers: Matchers, labels: Sequence[str]) -> str:
    """The raw starts counter (one series per start, 1 from its ready point) over each point's interval: what
    Prometheus keeps the exemplars of (each the start's trace_id and root span, arriving over OTLP); a recorded
    series has none."""
    return q.agg("sum", labels, f"max_over_time({q.selector(v.STARTS, matchers)}[{INTERVAL}])")


def slowest_starts(matchers: Matchers, window: str, labels: Sequence[str], n: int = 20) -> str:
    """The ``n`` slowest starts of the window, one row per start (``labels`` should include the trace id)."""
    return f"topk({n}, {q.agg('max', labels, _new(v.LAST_START, matchers, window))})"


def time_to_ready_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    """Quantile of the whole start (API-server process creation to HTTP accepting) over ready starts (buckets:
    recording.READY_BOUNDS)."""
    buckets = _buckets(v.LAST_START, recording.READY_BOUNDS, labels, matchers, window, q.eq(v.OUTCOME, v.READY))
    return f"histogram_quantile({quantile}, {buckets})"


def mean_time_to_ready(matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    ready = q.eq(v.OUTCOME, v.READY)
    return (f"{_over_new('sum', labels, v.LAST_START, matchers, window, ready, ratio=True)} / "
            f"{_over_new('count', labels, v.LAST_START, matchers, window, ready, ratio=True)}")


def phase_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str] = (v.PHASE,),
                   phases: Sequence[str] = ()) -> str:
    """Quantile of each phase's time per start (buckets: recording.PHASE_BOUNDS; tensor-parallel workers each
    count over OTLP), over the fleet selections ``phase_matchers`` keeps."""
    only = q.re(v.PHASE, ph.regex(phases)) if phases else ""
    buckets = _buckets(v.PHASE_LAST, recording.PHASE_BOUNDS, labels, phase_matchers(matchers), window, only,
                       level=recording.PHASE)
    return f"histogram_quantile({quantile}, {buckets})"


def phase_mean_per_process(matchers: Matchers, window: str, phases: Sequence[str]) -> str:
    """Mean time per start of each phase, label ``vllm_startup_phase``: each process kind's phase total divided
    by the number of processes of that kind (their process phases), summed over kinds. Parallel processes of a
    kind (tensor-parallel workers, data-parallel engines) count once, processes of different kinds add up."""
    m, level = phase_matchers(matchers), recording.PHASE
    num = _over_new("sum", [v.PHASE, v.PROCESS_KIND], v.PHASE_LAST, m, window, q.re(v.PHASE, ph.regex(phases)),
                    ratio=True, level=level)
    processes = _over_new("count", [v.PROCESS_KIND], v.PHASE_LAST, m, window,
                          q.re(v.PHASE, ph.regex(list(ph.PROCESS_PHASE.values()))), ratio=True, level=level)
    return q.agg("sum", [v.PHASE], f"{num} / {q.on([v.PROCESS_KIND])} group_left () {processes}")


def unlisted_time(matchers: Matchers, window: str, phases: Sequence[str]) -> str:
    """Mean time-to-ready not covered by ``phases`` (stacked with them it adds up to the mean), no labels."""
    listed = q.agg("sum", [], phase_mean_per_process(matchers, window, phases))
    return f"clamp_min({mean_time_to_ready(phase_matchers(matchers), window)} - {listed}, 0)"


def phase_seconds_per_start(matchers: Matchers, window: str, keys: Sequence[str], phases: Sequence[str]) -> str:
    """Each start's time in each phase (its slowest process of a kind), labels ``keys`` + phase + process kind."""
    labels = [*keys, v.PHASE, v.PROCESS_KIND]
    return q.agg("max", labels, _new(v.PHASE_LAST, matchers, window, q.re(v.PHASE, ph.regex(phases))))


def phase_fleet_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str],
                         phases: Sequence[str], offset: str = "") -> str:
    """A baseline of each phase by ``labels`` (a subset of recording.MODEL_PHASE_KEEP) over the ``window``
    ending ``offset`` ago: the median of the hourly 95th percentiles recorded in it, a typical hour's p95 (raw:
    the quantile over the starts of the window)."""
    sel = [*matchers, q.re(v.PHASE, ph.regex(phases)) if phases else ""]
    rec = recording.lookup(v.PHASE_LAST, "p95", labels, sel, recording.MODEL_PHASE)
    if rec is not None and quantile == recording.QUANTILE:
        at = f" offset {offset}" if offset else ""
        return q.agg("max", labels, f"quantile_over_time(0.5, {q.selector(rec.record, sel)}[{window}]{at})")
    return q.agg("quantile", labels, q.seen_in(q.selector(v.PHASE_LAST, sel), window, offset), f"{quantile:g}")


def phase_starts(matchers: Matchers, window: str, labels: Sequence[str], phases: Sequence[str],
                 offset: str = "") -> str:
    """A baseline's sample size: the starts of each phase in the ``window`` ending ``offset`` ago, from the
    per-start series (a recorded hourly count would need the evaluation interval to turn a sum over time into
    starts, and rule-test tools evaluate at their own)."""
    sel = q.selector(v.PHASE_LAST, [*matchers, q.re(v.PHASE, ph.regex(phases))])
    return q.agg("count", labels, q.seen_in(sel, window, offset))


def in_progress(metric: str, matchers: Matchers, labels: Sequence[str], *extra: str) -> str:
    """Starts still in progress: an in-progress series' latest value per ``labels`` (include the trace id to keep
    starts apart), starts that already ended (a ``last_start`` series with their trace id) left out: over OTLP
    a finished process's last point stays in the store for its staleness window."""
    sel = q.selector(metric, [*matchers, *extra])
    return q.agg("max", labels, f"{sel} unless {q.on([v.TRACE_ID])} {v.LAST_START}")


def phase_fleet_usual(quantile: float, window: str, labels: Sequence[str], *extra: str) -> str:
    """The fleet's usual time of each phase by ``labels`` over the last ``window`` (phase_fleet_quantile)."""
    return phase_fleet_quantile(quantile, list(extra), window, labels, ())


def compile_hit_ratio(matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    """Share of torch.compile runs served from the compile cache."""
    hit = _over_new("sum", labels, v.COMPILES, matchers, window, q.eq(v.COMPILE_CACHE_HIT, v.TRUE), ratio=True)
    every = _over_new("sum", labels, v.COMPILES, matchers, window, ratio=True)
    return f"({hit} or {every} * 0) / {every}"


def compiles(matchers: Matchers, window: str, labels: Sequence[str], *extra: str) -> str:
    return _over_new("sum", labels, v.COMPILES, matchers, window, *extra)


def compile_keys(matchers: Matchers, window: str, labels: Sequence[str] = (v.MODEL, v.VLLM_VERSION)) -> str:
    """Distinct compile-cache keys seen in the window (cache fragmentation): one per configuration that
    compiled; more than one per model and version means restarts did not share a cache."""
    matchers = [m for m in matchers if not m.startswith(v.MODE)]  # the series has no mode: one per key
    keys = q.agg("count", [*labels, v.COMPILE_CACHE_KEY], q.seen_in(q.selector(v.COMPILE_KEYS, matchers), window))
    return q.agg("count", labels, keys)


def model_inspection_hit_ratio(matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    """Share of starts whose model inspection came from the modelinfo cache (no subprocess)."""
    hit = starts(matchers, window, labels, q.eq(v.MODEL_INSPECTION_CACHE_HIT, v.TRUE), ratio=True)
    known = starts(matchers, window, labels, q.re(v.MODEL_INSPECTION_CACHE_HIT, f"{v.TRUE}|{v.FALSE}"), ratio=True)
    return f"({hit} or {known} * 0) / {known}"


def weights_bytes(matchers: Matchers, window: str, labels: Sequence[str], *extra: str) -> str:
    return _over_new("sum", labels, v.WEIGHTS_BYTES, matchers, window, *extra)


def weights_gbps(matchers: Matchers, window: str, labels: Sequence[str] = (v.WEIGHTS_SOURCE,)) -> str:
    """Weight-loading throughput (GB/s, 10^9 bytes): bytes loaded over the time spent in Load weights."""
    seconds = _over_new("sum", labels, v.WEIGHTS_LOAD_TIME, matchers, window, ratio=True)
    loaded = _over_new("sum", labels, v.WEIGHTS_BYTES, matchers, window, ratio=True)
    return f"{loaded} / {seconds} / 1e9"
