"""The startup questions dashboards and alerts ask, as PromQL over the metric vocabulary.

Each function takes ``matchers`` (which starts: a fleet selection) and ``window`` (starts that happened in the
last ``window``, see promql.new_in) and returns one expression whose result labels are exactly ``labels``
(plus those named in the docstring).

Aggregations of new series go through ``_over_new``: where a recording rule (recording.py) holds the same
aggregation for the same window, the query reads the recorded series instead of recomputing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import phases as ph
from . import promql as q
from . import recording
from . import vocabulary as v

Matchers = Sequence[str]


def _new(metric: str, matchers: Matchers, window: str, *extra: str) -> str:
    return q.new_in(q.selector(metric, [*matchers, *extra]), window)


def _over_new(op: str, labels: Sequence[str], metric: str, matchers: Matchers, window: str, *extra: str) -> str:
    """``op by (labels)`` over the series new in ``window``: from a recording rule's series where one holds
    it (a count of series is then a sum of recorded counts), else from the raw series."""
    rec = recording.lookup(metric, op, window, labels, [*matchers, *extra])
    if rec is not None:
        return q.agg("sum", labels, q.selector(rec.record, [*matchers, *extra]))
    return q.agg(op, labels, _new(metric, matchers, window, *extra))


def starts(matchers: Matchers, window: str, labels: Sequence[str] = (), *extra: str) -> str:
    """Number of starts (one ``last_start`` series per start)."""
    return _over_new("count", labels, v.LAST_START, matchers, window, *extra)


def slowest_starts(matchers: Matchers, window: str, labels: Sequence[str], n: int = 20) -> str:
    """The ``n`` slowest starts of the window, one row per start (``labels`` should include the trace id)."""
    return f"topk({n}, {q.agg('max', labels, _new(v.LAST_START, matchers, window))})"


def time_to_ready_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    """Quantile of the whole start (API-server process creation to HTTP accepting) over ready starts."""
    return f"histogram_quantile({quantile}, " \
        f"{_over_new('sum', ['le', *labels], v.bucket(v.DURATION), matchers, window, q.eq(v.OUTCOME, v.READY))})"


def mean_time_to_ready(matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    ready = q.eq(v.OUTCOME, v.READY)
    return (f"{_over_new('sum', labels, v.sum_of(v.DURATION), matchers, window, ready)} / "
            f"{_over_new('sum', labels, v.count_of(v.DURATION), matchers, window, ready)}")


def phase_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str] = (v.PHASE,),
                   phases: Sequence[str] = ()) -> str:
    """Quantile of each phase's span durations (every span: two tensor-parallel workers give two)."""
    only = q.re(v.PHASE, ph.regex(phases)) if phases else ""
    return (f"histogram_quantile({quantile}, "
            f"{_over_new('sum', ['le', *labels], v.bucket(v.PHASE_DURATION), matchers, window, only)})")


def phase_fleet_quantile(quantile: float, matchers: Matchers, window: str, labels: Sequence[str],
                         phases: Sequence[str], offset: str = "") -> str:
    """Like phase_quantile over every phase series present in the window ending ``offset`` ago (a baseline:
    starts of pods alive then, not only starts that happened then)."""
    sel = q.selector(v.bucket(v.PHASE_DURATION), [*matchers, q.re(v.PHASE, ph.regex(phases))])
    return q.histogram_quantile(quantile, q.seen_in(sel, window, offset), labels)


def phase_mean_per_process(matchers: Matchers, window: str, phases: Sequence[str]) -> str:
    """Mean time per start of each phase, label ``vllm_startup_phase``: each process kind's phase total divided
    by the number of processes of that kind (their process spans), summed over kinds. Parallel processes of a
    kind (tensor-parallel workers, data-parallel engines) count once, processes of different kinds add up."""
    num = _over_new("sum", [v.PHASE, v.PROCESS_KIND], v.sum_of(v.PHASE_DURATION), matchers, window,
                    q.re(v.PHASE, ph.regex(phases)))
    processes = _over_new("sum", [v.PROCESS_KIND], v.count_of(v.PHASE_DURATION), matchers, window,
                          q.re(v.PHASE, ph.regex(list(ph.PROCESS_PHASE.values()))))
    return q.agg("sum", [v.PHASE], f"{num} / {q.on([v.PROCESS_KIND])} group_left () {processes}")


def unlisted_time(matchers: Matchers, window: str, phases: Sequence[str]) -> str:
    """Mean time-to-ready not covered by ``phases`` (stacked with them it adds up to the mean), no labels."""
    listed = q.agg("sum", [], phase_mean_per_process(matchers, window, phases))
    return f"clamp_min({mean_time_to_ready(matchers, window)} - {listed}, 0)"


def phase_seconds_per_start(matchers: Matchers, window: str, keys: Sequence[str], phases: Sequence[str]) -> str:
    """Each start's mean span duration of each phase, labels ``keys`` + phase + process kind."""
    labels = [*keys, v.PHASE, v.PROCESS_KIND]
    only = q.re(v.PHASE, ph.regex(phases))
    return (f"{_over_new('sum', labels, v.sum_of(v.PHASE_DURATION), matchers, window, only)} / "
            f"{_over_new('sum', labels, v.count_of(v.PHASE_DURATION), matchers, window, only)}")


def phase_spans(matchers: Matchers, window: str, labels: Sequence[str], phases: Sequence[str],
                offset: str = "") -> str:
    """Number of spans of each phase in the window ending ``offset`` ago (a baseline's sample size)."""
    sel = q.selector(v.count_of(v.PHASE_DURATION), [*matchers, q.re(v.PHASE, ph.regex(phases))])
    return q.agg("sum", labels, q.seen_in(sel, window, offset))


def in_progress(metric: str, matchers: Matchers, labels: Sequence[str], *extra: str) -> str:
    """Starts still in progress: an in-progress series' latest value per ``labels`` (include the trace id to keep
    starts apart), starts that already ended (a ``last_start`` series with their trace id) left out: over OTLP
    a finished process's last point stays in the store for its staleness window."""
    sel = q.selector(metric, [*matchers, *extra])
    return q.agg("max", labels, f"{sel} unless {q.on([v.TRACE_ID])} {v.LAST_START}")


def phase_fleet_usual(quantile: float, window: str, labels: Sequence[str], *extra: str) -> str:
    """Quantile of every phase's span durations over the series present in the last ``window`` (the fleet's
    usual time of each phase, by ``labels``)."""
    return q.histogram_quantile(quantile, q.seen_in(q.selector(v.bucket(v.PHASE_DURATION), extra), window), labels)


def compile_hit_ratio(matchers: Matchers, window: str, labels: Sequence[str] = ()) -> str:
    """Share of torch.compile runs served from the compile cache."""
    hit = _over_new("sum", labels, v.COMPILES, matchers, window, q.eq(v.COMPILE_CACHE_HIT, v.TRUE))
    every = _over_new("sum", labels, v.COMPILES, matchers, window)
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
    hit = starts(matchers, window, labels, q.eq(v.MODEL_INSPECTION_CACHE_HIT, v.TRUE))
    known = starts(matchers, window, labels, q.re(v.MODEL_INSPECTION_CACHE_HIT, f"{v.TRUE}|{v.FALSE}"))
    return f"({hit} or {known} * 0) / {known}"


def weights_bytes(matchers: Matchers, window: str, labels: Sequence[str], *extra: str) -> str:
    return _over_new("sum", labels, v.WEIGHTS_BYTES, matchers, window, *extra)


def weights_gbps(matchers: Matchers, window: str, labels: Sequence[str] = (v.WEIGHTS_SOURCE,)) -> str:
    """Weight-loading throughput (GB/s, 10^9 bytes): bytes loaded over the time spent in Load weights."""
    seconds = _over_new("sum", labels, v.WEIGHTS_LOAD_TIME, matchers, window)
    return f"{weights_bytes(matchers, window, labels)} / {seconds} / 1e9"
