"""model/intervals.py: interval arithmetic on (start, end) nanosecond pairs behind the per-process accounting,
the critical path, the predictor and the waterfall."""

from __future__ import annotations

from vllm_otel_startup.model import intervals as iv


def test_merge_sorts_and_joins_overlapping_and_touching_intervals():
    assert iv.merge([(5, 7), (0, 2), (2, 3), (6, 9), (11, 12)]) == [(0, 3), (5, 9), (11, 12)]
    assert iv.merge([]) == []


def test_union_length_counts_an_overlap_once():
    assert iv.union_length([(0, 10), (5, 15), (20, 21)]) == 16


def test_minus_keeps_what_the_taken_intervals_do_not_cover():
    assert iv.minus([(0, 10), (20, 30)], [(2, 4), (8, 22)]) == [(0, 2), (4, 8), (22, 30)]
    assert iv.minus([(0, 10)], []) == [(0, 10)]
    assert iv.minus([(3, 5)], [(0, 10)]) == []


def test_overlaps_is_open_and_covers_excludes_the_end():
    merged = [(0, 10), (20, 30)]
    assert iv.overlaps(merged, 9, 15) and iv.overlaps(merged, 15, 21)
    assert not iv.overlaps(merged, 10, 20)  # touching both, meeting neither
    assert iv.covers(merged, 0) and iv.covers(merged, 29.5)
    assert not iv.covers(merged, 10) and not iv.covers(merged, -1) and not iv.covers(merged, 30)


def test_gaps_name_the_interval_that_ends_right_before_each():
    spans = [(10, 20, "a"), (15, 30, "b"), (40, 50, "c")]
    assert iv.gaps(spans, 0, 60) == [(0, 10, None), (30, 40, "b"), (50, 60, "c")]
    assert iv.gaps(spans, 12, 28) == []  # clipped to [start, end]


def test_uncovered_is_the_total_and_the_largest_gap_the_earliest_of_equals():
    spans = [(10, 20, "a"), (30, 40, "b")]
    assert iv.uncovered(spans, 0, 50) == (30, 10, 0, None)  # three gaps of 10: the first one
    assert iv.uncovered([(0, 50, "all")], 0, 50) == (0, 0, 0, None)
