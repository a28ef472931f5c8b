"""model/facts.py: what a start's spans say, read once: the root and the links (a span whose parent was lost hangs
under the root), each process's lane, the time of each phase (nested or parallel spans counted once), the leaves
(detail spans never make a phase a parent), the cause labels and the start's facts. On a real recorded start where
a whole start is needed (tests/data/starts/dev)."""

from __future__ import annotations

import pytest
from recorded import dev

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import facts as F
from vllm_otel_startup.model.spanmodel import Span

S = 1_000_000_000


def span(sid: str, parent: str | None, start: float, end: float, name: str = "x", **attrs) -> Span:
    return Span("t" * 32, sid, parent, name, int(start * S), int(end * S), attrs, {})


def test_the_root_is_the_parentless_vllm_startup_and_a_lost_parent_hangs_under_it():
    root = span("r", None, 0, 10, sc.ROOT_SPAN)
    nested_copy = span("r2", "r", 1, 2, sc.ROOT_SPAN)
    a, b, orphan = span("a", "r", 2, 5), span("b", "r", 1, 3), span("o", "lost", 4, 6)
    spans = [nested_copy, a, b, orphan, root]
    assert F.find_root(spans) is root and F.find_root([a]) is None
    assert F.link(spans) is root
    assert root.children == [b, nested_copy, a, orphan]  # by start (the longer first), the orphan too


def test_phase_seconds_count_overlapping_spans_of_a_phase_once_per_process_kind():
    spans = [span("1", None, 0, 4, **{sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"}),
             span("2", None, 2, 6, **{sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"}),  # another rank
             span("3", None, 0, 1, **{sc.PHASE: "weights_load", sc.PROCESS_KIND: "engine_core"}),
             span("4", None, 0, 9)]  # no phase: not counted
    assert F.phase_seconds(spans) == {("worker", "weights_load"): 6.0, ("engine_core", "weights_load"): 1.0}


def test_detail_spans_are_leaves_and_never_make_their_phase_a_parent():
    phase = span("p", None, 0, 5, **{sc.PHASE: "weights_load"})
    gc = span("g", "p", 1, 2, **{sc.PHASE: "gc"})
    inner = span("i", "p2", 0, 1)
    parent = span("p2", None, 0, 2, **{sc.PHASE: "config"})
    assert F.leaves([phase, gc, inner, parent]) == [phase, gc, inner]


def test_kind_rank_and_small_readers():
    s = span("w", None, 0, 1, **{sc.PROCESS_KIND: "worker", sc.WORKER_RANK: 3})
    assert (F.kind_of(s), F.rank_of(s), F.phase_of(s)) == ("worker", 3, "")
    assert F.kind_of(span("u", None, 0, 1)) == "?"
    assert F.rank_of(span("b", None, 0, 1, **{sc.WORKER_RANK: True})) is None  # a flag is no rank
    assert F.no_aot_artifact_yet("FileNotFoundError: no artifact") and not F.no_aot_artifact_yet("OSError: x")


def test_a_child_folds_into_its_parent_when_it_is_nearly_all_of_it_and_neither_has_a_cause():
    parent, child = span("p", None, 0, 10), span("c", "p", 0, 9.6)
    assert F.folds_into(parent, child)
    assert not F.folds_into(parent, span("c", "p", 0, 9.0))
    assert not F.folds_into(parent, span("c", "p", 0, 10, **{sc.MODEL_INSPECTION_CACHE_HIT: False}))
    assert F.cause_labels(span("c", "p", 0, 1, **{sc.MODEL_INSPECTION_CACHE_HIT: True})) == ["modelinfo cache hit"]


def test_a_starts_lanes_and_facts():
    st = dev("eager-cold")
    assert [(ln.kind, ln.rank) for ln in st.lanes] == [("api_server", None), ("engine_core", None), ("worker", 0)]
    assert st.lanes[0].span is st.root and st.lanes[2].label.startswith("worker 0 (pid ")
    assert all(s in st.spans for ln in st.lanes for s in ln.spans)
    f = st.facts
    assert (f.outcome, f.mode, f.device, f.compiled, f.modelinfo_hit, f.weights_source) == (
        "ready", "cold", "cpu", False, False, "local_dir")
    assert f.total == pytest.approx(st.root.duration) and f.seconds[("worker", "weights_load")] > 0
    assert F.key_causes(f)[:2] == [f"modelinfo cache miss ({f.inspection_s:.1f} s)", "no torch.compile (eager)"]


def test_a_failed_starts_facts_name_its_error():
    f = dev("bad-model").facts
    assert f.outcome == "failed" and f.error
