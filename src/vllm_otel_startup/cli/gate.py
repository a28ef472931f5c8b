"""``compare A B --fail-if-slower PCT [--phase ID]``: a startup-time gate for CI. B is the candidate (a new image,
a vLLM upgrade, a flag), A the baseline; the command exits 1 when B's whole start (or one phase, by the phase id
the report and its JSON use) is more than PCT percent slower than A's, with one line saying what and by how much.
Bad input (a PCT that is not a number >= 0, a phase id outside the vocabulary or absent from a side) exits 2."""

from __future__ import annotations

import argparse
import math

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.comparison import Comparison, Row
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import KIND_LABEL, seconds
from vllm_otel_startup.model.formatting import signed_seconds

__all__ = ["check", "percent"]

WHOLE = "startup"  # the root span's phase id: the whole start


def percent(text: str) -> float:
    """argparse type of PCT: a finite number >= 0 ("10", "2.5"; a trailing % is allowed)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (a percentage such as 10)") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the percentage must be a number >= 0")
    return value


def _pct(r: Row) -> float:
    a, b = r.a or 0.0, r.b or 0.0
    if a <= 0:
        return math.inf if b > 0 else 0.0
    return 100.0 * (b - a) / a


def _describe(r: Row) -> str:
    return f"{r.name} [{KIND_LABEL.get(r.key[0], r.key[0])}] {seconds(r.a or 0)} → {seconds(r.b or 0)}, " \
           f"{signed_seconds(r.delta)} ({_pct(r):+.1f}%)"


def _rows(cmp: Comparison, phase: str) -> list[Row]:
    if phase not in sc.PHASES:
        raise ReportError(f"--phase {phase}: not a phase id (the ids are the report's phases, e.g. weights_load, "
                          "torch_compile, engine_core_process; docs/telemetry.md lists them)")
    rows = [r for r in cmp.rows if r.key[1] == phase]
    if not rows:
        raise ReportError(f"--phase {phase}: neither A nor B has this phase")
    for side in ("a", "b"):
        if all(getattr(r, side) is None for r in rows):
            raise ReportError(f"--phase {phase}: {side.upper()} has no such phase (nothing to compare)")
    return [r for r in rows if r.a is not None and r.b is not None]


def check(cmp: Comparison, limit: float, phase: str | None = None) -> tuple[int, str]:
    """(exit status, the one line): 1 when a gated row of B is more than ``limit`` % slower than A's, else 0.
    A phase several process kinds run (imports, ...) is gated in each; the line names the worst."""
    rows = _rows(cmp, phase or WHOLE)
    if not rows:
        raise ReportError(f"--phase {phase}: no process kind has it on both sides")
    worst = max(rows, key=_pct)
    over = [r for r in rows if _pct(r) > limit]
    if over:
        more = f" (and {len(over) - 1} more process kind(s))" if len(over) > 1 else ""
        return 1, f"slower: {_describe(worst)}, over the {limit:g}% limit{more}"
    return 0, f"within {limit:g}%: {_describe(worst)}"
