"""Coverage of a time window by spans: shared by the per-process accounting and the report."""

from __future__ import annotations

from collections.abc import Iterable


def uncovered(spans: Iterable[tuple[int, int, str | None]], start: int, end: int) -> tuple[int, int, int, str | None]:
    """Time in [start, end] that no (start, end, name) interval covers; the largest such gap, where it
    begins, and the name of the interval that ends right before it."""
    total = largest = 0
    largest_at, largest_after = start, None
    cursor, last = start, None
    for s, e, name in sorted(spans, key=lambda x: (x[0], x[1])):
        s, e = max(s, start), min(e, end)
        if e <= cursor:
            continue
        if s > cursor:
            total += s - cursor
            if s - cursor > largest:
                largest, largest_at, largest_after = s - cursor, cursor, last
        cursor, last = e, name
    if end > cursor:
        total += end - cursor
        if end - cursor > largest:
            largest, largest_at, largest_after = end - cursor, cursor, last
    return total, largest, largest_at, largest_after
