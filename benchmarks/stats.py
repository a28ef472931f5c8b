"""The statistics every paired benchmark reports: per-pair ratios summarised by their median and geometric mean, a
bootstrap 95 % interval of the median and the sign test (slower in k of n pairs)."""

from __future__ import annotations

import math
import random
import statistics


def sign_p(k: int, n: int) -> float:
    """The sign test's two-sided p of ``k`` of ``n`` pairs on one side, under no difference."""
    tail = sum(math.comb(n, i) for i in range(max(k, n - k), n + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def bootstrap_median(values: list[float], seed: int = 25, rounds: int = 10_000) -> tuple[float, float]:
    """A bootstrap 95 % interval of the median (resampled ``rounds`` times, a fixed seed: the same rows give the
    same interval)."""
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return boots[int(rounds * 0.025)], boots[int(rounds * 0.975)]


def summary(ratios: list[float], seed: int = 25) -> dict[str, float]:
    """Median and geometric mean of the per-pair ratios, a bootstrap 95 % interval of the median, and the sign test's
    two-sided p (instrumented slower in k of n pairs)."""
    low, high = bootstrap_median(ratios, seed)
    n, k = len(ratios), sum(r > 1 for r in ratios)
    return {"pairs": n, "median": statistics.median(ratios),
            "geomean": math.exp(statistics.fmean(math.log(r) for r in ratios)),
            "ci95_low": low, "ci95_high": high, "slower_in": k, "sign_p": sign_p(k, n)}


def median_diff(on: list[float], off: list[float]) -> float:
    """The difference of two arms' medians (an arm's added cost where its runs are not paired one to one)."""
    return statistics.median(on) - statistics.median(off)
