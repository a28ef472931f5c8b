"""How durations and sizes read everywhere (summary, report, pictures, compare, predict)."""

from __future__ import annotations


def seconds(v: float) -> str:
    """Compact duration: 0.012 s, 1.23 s, 12.3 s, 123 s."""
    if v < 0.1:
        return f"{v:.3f} s"
    if v < 10:
        return f"{v:.2f} s"
    if v < 100:
        return f"{v:.1f} s"
    return f"{v:.0f} s"


def signed_seconds(v: float) -> str:
    """A difference: +1.23 s, -1.23 s, and ±0.000 s for exactly zero (no direction)."""
    return ("+" if v > 0 else "-" if v < 0 else "±") + seconds(abs(v))


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
