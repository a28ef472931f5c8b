"""A picture of two fleets' phase breakdown from real query results (e.g. the fleet overview's "Mean phase time
over the range" evaluated for fleet A and for fleet B): per phase, A's and B's value as paired bars, with the
difference. Drawn with the report's canvas (PNG via Pillow), so it needs no Grafana.

    render(a, b, "cold", "warm", "docs/img/fleet-compare.png")   # a, b: {phase id: seconds}
"""

from __future__ import annotations

from vllm_otel_startup.canvas import Line, Rect, Scene, Text, fit

from .phases import STACKED_PHASES

A_FILL, B_FILL, FASTER, SLOWER = "#8a9bb0", "#2b7bb9", "#1a7f37", "#b3261e"


def scene(a: dict[str, float], b: dict[str, float], a_label: str, b_label: str, title: str, top: int = 18) -> Scene:
    phases = sorted(set(a) | set(b), key=lambda p: -max(a.get(p, 0.0), b.get(p, 0.0)))[:top]
    order = {p: i for i, p in enumerate(STACKED_PHASES)}
    phases.sort(key=lambda p: (order.get(p, len(order)), -max(a.get(p, 0.0), b.get(p, 0.0))))
    width, left, right = 1200, 250, 230
    plot = width - left - right - 20
    vmax = max([0.001] + [max(a.get(p, 0.0), b.get(p, 0.0)) for p in phases])
    s = Scene(width, 0)
    s.add(Text(16, 20, title, 18, bold=True))
    s.add(Rect(16, 44, 14, 10, A_FILL))
    s.add(Text(36, 49, f"A: {a_label}", 12, "#333"))
    s.add(Rect(width / 2, 44, 14, 10, B_FILL))
    s.add(Text(width / 2 + 20, 49, f"B: {b_label}", 12, "#333"))
    y = 70
    for n, p in enumerate(phases):
        h = 30
        if n % 2 == 0:
            s.add(Rect(0, y, width, h, "#f7f9fa"), 0)
        s.add(Text(16, y + h / 2, fit(p, 12, left - 30), 12))
        for k, (v, fill) in enumerate(((a.get(p), A_FILL), (b.get(p), B_FILL))):
            if v:
                s.add(Rect(left, y + 4 + k * 11, max(plot * v / vmax, 1), 10, fill, title=f"{p} {'AB'[k]}: {v:.2f} s"))
        va, vb = a.get(p), b.get(p)
        text = f"{_s(va)} → {_s(vb)}"
        color = "#555"
        if va is not None and vb is not None:
            d = vb - va
            text += f"  ({'+' if d >= 0 else '−'}{abs(d):.2f} s)"
            color = FASTER if d < -0.05 else SLOWER if d > 0.05 else "#555"
        s.add(Text(left + plot + 16, y + h / 2, text, 12, color))
        y += h
    s.add(Line(left, 64, left, y, "#bbb"))
    s.add(Text(16, y + 14, "from vllm_startup_phase_last_duration_seconds; absent = the phase did not run in that "
               "fleet", 11, "#666"))
    s.height = y + 30
    return s


def _s(v: float | None) -> str:
    return "absent" if v is None else f"{v:.2f} s"


def render(a: dict[str, float], b: dict[str, float], a_label: str, b_label: str, path: str,
           title: str = "vLLM startup, fleet A vs B, phase by phase") -> None:
    scene(a, b, a_label, b_label, title).png(path)
