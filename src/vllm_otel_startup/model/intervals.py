"""Interval arithmetic on (start, end) nanosecond pairs: the one implementation behind the per-process
accounting (agent), the phase seconds, the critical path, the predictor's disjoint groups and the
waterfall's unexplained stretches."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

Interval = tuple[int, int]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time (touching intervals join)."""
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def union_length(intervals: Iterable[Interval]) -> int:
    """Time the intervals cover together (overlaps count once)."""
    return sum(b - a for a, b in merge(intervals))


def minus(intervals: list[Interval], taken: list[Interval]) -> list[Interval]:
    """The parts of ``intervals`` that ``taken`` (merged) does not cover."""
    out = []
    for a, b in intervals:
        cur = a
        for c, d in taken:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def overlaps(merged: list[Interval], a: float, b: float) -> bool:
    """Whether the open interval (a, b) meets one of these merged intervals."""
    i = bisect.bisect_left(merged, (b, float("-inf"))) - 1  # the last interval starting before b
    return i >= 0 and merged[i][1] > a


def covers(merged: list[Interval], t: float) -> bool:
    """Whether a point lies inside one of these merged intervals (end excluded)."""
    i = bisect.bisect_right(merged, (t, float("inf"))) - 1
    return i >= 0 and merged[i][1] > t


def gaps(spans: Iterable[tuple[int, int, str | None]], start: int, end: int) -> list[tuple[int, int, str | None]]:
    """The stretches of [start, end] no (start, end, name) interval covers, each with the name of the interval
    that ends right before it."""
    out: list[tuple[int, int, str | None]] = []
    cursor, last = start, None
    for s, e, name in sorted(spans, key=lambda x: (x[0], x[1])):
        s, e = max(s, start), min(e, end)
        if e <= cursor:
            continue
        if s > cursor:
            out.append((cursor, s, last))
        cursor, last = e, name
    if end > cursor:
        out.append((cursor, end, last))
    return out


def uncovered(spans: Iterable[tuple[int, int, str | None]], start: int, end: int) -> tuple[int, int, int, str | None]:
    """Time in [start, end] that no (start, end, name) interval covers; the largest such gap (the earliest of
    equals), where it begins, and the name of the interval that ends right before it."""
    found = gaps(spans, start, end)
    if not found:
        return 0, 0, start, None
    a, b, after = max(found, key=lambda g: g[1] - g[0])
    return sum(e - s for s, e, _ in found), b - a, a, after
