"""CPython's data-stack chunks (python/cpython#142183, issue 25): a loop whose callee's frame lands on a chunk
boundary maps and unmaps a chunk on every call. Prints, for one loop of calls at each stack depth, the depths where
that happens, the time per call there against elsewhere, and the page faults per call. Run it with each Python:

    python -m benchmarks stack-chunks [--calls 20000] [--depths 600]
"""

from __future__ import annotations

import resource
import statistics
import sys
import time

from benchmarks import command_parser


def leaf(a: object = None) -> object:
    return a


def loop(n: int) -> None:
    for _ in range(n):
        leaf()


def descend(depth: int, n: int) -> None:
    if depth == 0:
        return loop(n)
    return descend(depth - 1, n)


def measure(depths: int, calls: int) -> list[tuple[int, float, float]]:
    """(depth, page faults per call, ns per call) for each depth."""
    rows = []
    for d in range(depths):
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        descend(d, calls)
        dt, faults = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        rows.append((d, faults / calls, dt / calls * 1e9))
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("stack-chunks", __doc__)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--depths", type=int, default=600)
    a = ap.parse_args(argv)
    rows = measure(a.depths, a.calls)
    bad = [r for r in rows if r[1] > 0.5]
    typical = statistics.median(r[2] for r in rows if r[1] < 0.01)
    print(f"Python {sys.version.split()[0]}: {len(bad)} of {len(rows)} depths map a chunk per call "
          f"({', '.join(str(r[0]) for r in bad)})")
    print(f"  ns per call: {typical:.0f} typical, {statistics.median(r[2] for r in bad) if bad else 0:.0f} there; "
          f"page faults per call there: {statistics.median(r[1] for r in bad) if bad else 0:.2f}")
