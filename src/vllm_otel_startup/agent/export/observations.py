"""Startup spans -> metric observations: the one derivation both export paths use (OTLP from each process,
and the API server's collector on vLLM's /metrics), so they report the same numbers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation.versions import start_facts, start_versions
from vllm_otel_startup.model.argv import model_name
from vllm_otel_startup.model.redact import scrub
from vllm_otel_startup.model.spanmodel import Span

PHASE_LAST = "vllm.startup.phase.last_duration"


class Obs(NamedTuple):
    metric: str  # a name of semconv.STARTUP_METRICS
    value: float
    labels: dict[str, str]
    trace_id: str | None = None  # exemplar: the observed span
    span_id: str | None = None


def label_value(v: Any) -> str:
    """Label values are strings on both paths (Prometheus has no other kind): true/false, decimal ints."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def fleet_labels(facts: dict[str, Any]) -> dict[str, str]:
    """The fleet label values of a start, scrubbed; the model by its name (a hub id, or the last component of
    its path or URL: never a local path, a URL or its query on every series)."""
    labels = {k: scrub(label_value(facts.get(k))) for k in sc.FLEET_LABELS}
    labels[sc.MODEL] = model_name(facts.get(sc.MODEL)) if facts.get(sc.MODEL) else ""
    return labels


def process_fleet(root: bool, facts: dict[str, Any], sampler: Any) -> dict[str, str]:
    """This process's fleet label values: the API server's (``root``) from its own facts; a child's from the API
    server's (handed over at spawn), its own versions and device (``sampler``: its device model) where those have
    none."""
    if root:
        return fleet_labels(start_facts(facts, sampler))
    device_model = sampler.device_model if sampler is not None else None
    try:
        labels = json.loads(settings.text(settings.LABELS) or "{}")
    except ValueError:
        labels = {}
    own = fleet_labels({**start_versions(), sc.DEVICE_MODEL: device_model})
    return {k: str(labels.get(k) or own[k]) for k in own}


def _process_of(s: Span) -> str:
    return str(s.resource.get("service.instance.id") or s.resource.get("process.pid") or "")


def span_observations(spans: Iterable[Span], fleet: dict[str, str]) -> list[Obs]:
    """Per-phase metrics: each metric phase's time (semconv.METRIC_PHASES; its spans in one process added up; of
    several processes of one kind, the slowest), compiles, weights, CUDA graphs."""
    out: list[Obs] = []
    totals: dict[tuple[str, str], dict[str, Obs]] = {}  # (phase, kind) -> process -> its total
    for s in spans:
        a = s.attrs
        phase = a.get(sc.PHASE)
        if not phase:
            continue
        kind = label_value(a.get(sc.PROCESS_KIND))
        ids = (s.trace_id, s.span_id)
        if phase in sc.METRIC_PHASES:
            per_process = totals.setdefault((phase, kind), {})
            prev = per_process.get(_process_of(s))
            per_process[_process_of(s)] = (prev._replace(value=prev.value + s.duration) if prev else
                                           Obs(PHASE_LAST, s.duration,
                                               {**fleet, sc.PHASE: phase, sc.PROCESS_KIND: kind}, *ids))
        if phase == "torch_compile" or aot_loaded(s):  # a loaded AOT artifact is the compile, from the cache
            hit = {sc.COMPILE_CACHE_HIT: label_value(True if phase == "aot_load" else a.get(sc.COMPILE_CACHE_HIT))}
            out.append(Obs("vllm.startup.compiles", 1, {**fleet, **hit}, *ids))
            if a.get(sc.COMPILE_CACHE_KEY):  # bounded: one series per key (a key fixes every other fleet label)
                keyed = {**{k: v for k, v in fleet.items() if k != sc.MODE},
                         sc.COMPILE_CACHE_KEY: label_value(a[sc.COMPILE_CACHE_KEY])}
                out.append(Obs("vllm.startup.compile_keys", 1, keyed, *ids))
        elif phase == "weights_load":
            src = {**fleet, sc.WEIGHTS_SOURCE: label_value(a.get(sc.WEIGHTS_SOURCE))}
            if sc.WEIGHTS_BYTES in a:
                out.append(Obs("vllm.startup.weights.bytes", float(a[sc.WEIGHTS_BYTES]), src, *ids))
            out.append(Obs("vllm.startup.weights.load_time", s.duration, src, *ids))
        elif phase == "cudagraph_capture" and sc.CUDAGRAPH_COUNT in a:
            out.append(Obs("vllm.startup.cudagraphs", float(a[sc.CUDAGRAPH_COUNT]), dict(fleet), *ids))
    return [max(per_process.values(), key=lambda o: o.value) for per_process in totals.values()] + out


def aot_loaded(s: Span) -> bool:
    """An ``AOT cache load`` that loaded the artifact (vLLM >= 0.17's warm start: no torch.compile runs)."""
    return s.attrs.get(sc.PHASE) == "aot_load" and s.attrs.get(sc.COMPILE_AOT_LOADED) is True


def _compile_hit(spans: list[Span]) -> str:
    hits = [True if aot_loaded(s) else s.attrs[sc.COMPILE_CACHE_HIT] for s in spans
            if aot_loaded(s) or (s.attrs.get(sc.PHASE) == "torch_compile" and sc.COMPILE_CACHE_HIT in s.attrs)]
    return "" if not hits else label_value(all(hits))


def _first(spans: list[Span], phase: str, key: str) -> str:
    return next((label_value(s.attrs[key]) for s in spans if s.attrs.get(sc.PHASE) == phase and key in s.attrs), "")


def start_observations(spans: list[Span], fleet: dict[str, str]) -> list[Obs]:
    """Whole-start metrics, from the root span and the causes found anywhere in the start."""
    roots = [s for s in spans if s.attrs.get(sc.PHASE) == "startup"]
    if not roots:
        return []
    root = roots[0]
    outcome = {**fleet, sc.OUTCOME: label_value(root.attrs.get(sc.OUTCOME, "failed"))}
    ids = (root.trace_id, root.span_id)
    causes = {
        sc.TRACE_ID: root.trace_id,
        sc.COMPILE_CACHE_HIT: _compile_hit(spans),
        sc.MODEL_INSPECTION_CACHE_HIT: _first(spans, "model_inspection", sc.MODEL_INSPECTION_CACHE_HIT),
        sc.WEIGHTS_SOURCE: _first(spans, "weights_load", sc.WEIGHTS_SOURCE),
    }
    return [
        Obs("vllm.startup.starts", 1, outcome, *ids),
        Obs("vllm.startup.last_start.duration", root.duration, {**outcome, **causes}, *ids),
        *rank_wait_observations(spans, fleet),
    ]


RANK_WAITS_KEPT = 5


def rank_wait_observations(spans: list[Span], fleet: dict[str, str]) -> list[Obs]:
    """The start's longest rank waits (critical_path.rank_waits: the straggler of each leaf phase), one per phase."""
    if sum(1 for s in spans if s.attrs.get(sc.PHASE) == "worker_process") < 2:
        return []  # one worker or none: nothing to compare (and no linking of the start for it)
    from vllm_otel_startup.model.critical_path import rank_waits_of
    from vllm_otel_startup.model.facts import find_root

    root = find_root(spans)
    if root is None:
        return []
    out, seen = [], set()
    for w in rank_waits_of(root, spans):  # each /metrics scrape: the rank comparison only, no critical path
        if w.phase_id and w.phase_id not in seen and len(out) < RANK_WAITS_KEPT:
            seen.add(w.phase_id)
            out.append(Obs("vllm.startup.rank_wait", w.waited_s, {**fleet, sc.PHASE: w.phase_id}, root.trace_id,
                           root.span_id))
    return out


def whole_start_observations(spans: list[Span], fleet: dict[str, str]) -> list[Obs]:
    """What a start's /metrics serves: every process's phases and the whole start (the collector, and the
    multiprocess files of Prometheus multiprocess mode)."""
    return span_observations(spans, fleet) + start_observations(spans, fleet)
