"""The waterfall picture of one start: one lane per process (API server, EngineCore, each worker), its
phases as bars on a shared time axis (nested phases one row lower), waiting spans hatched grey, time no
span explains hatched red, process spawns as dashed connectors, causes in labels and tooltips, and a CPU
strip per lane when the spans carry the resource summary. Written as self-contained HTML (inline SVG, no
network) or PNG (Pillow)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from html import escape

from vllm_otel_startup import phase_groups as pg
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.canvas import Line, Rect, Scene, Text, fit, text_width
from vllm_otel_startup.cli import html_page, phase_tree
from vllm_otel_startup.model.facts import (
    KIND_LABEL,
    Facts,
    Lane,
    cause_labels,
    folds_into,
    key_causes,
    phase_of,
    seconds,
)
from vllm_otel_startup.model.intervals import gaps
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

WIDTH = 1400
LEFT = 200  # label column
RIGHT = 30
ROW = 22
BAR = 17
LANE_GAP = 14
CPU_STRIP = 16

# Legend label and colour of each of phase_groups.WATERFALL_GROUPS (its "other" group is drawn in OTHER).
GROUP_STYLE: dict[str, tuple[str, str]] = {
    "bootstrap": ("Python start, imports", "#b0bec5"),
    "config": ("config, model info, tokenizer", "#ce93d8"),
    "setup": ("engine and worker setup", "#90caf9"),
    "model": ("model and weights", "#a5d6a7"),
    "compile": ("torch.compile", "#ffb74d"),
    "kv_cache": ("KV cache, warm-up", "#80cbc4"),
    "cudagraphs": ("CUDA graphs", "#ef9a9a"),
    "http": ("HTTP server", "#9fa8da"),
}
CATEGORIES: list[tuple[str, str, tuple[str, ...]]] = [
    (*GROUP_STYLE[g], phases) for g, phases in pg.WATERFALL_GROUPS.items() if g != pg.OTHER_GROUP]
_COLOR = {ph: color for _, color, phases in CATEGORIES for ph in phases}
OTHER = "#e0e0e0"
WAIT_FILL, WAIT_HATCH = "#f5f5f5", "#bdbdbd"
GAP_FILL, GAP_HATCH = "#ffebee", "#e53935"
ERROR = "#c62828"


def _nice_step(total: float, px: float) -> float:
    raw = total / max(px / 90, 1)
    mag = 10 ** math.floor(math.log10(max(raw, 1e-9)))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def _rows(lane: Lane) -> tuple[dict[str, int], dict[str, list[Span]]]:
    """Row of each drawn span in its lane (nesting depth below the process span, this lane's spans only), and
    the chains drawn as one bar: a span whose one big same-lane child folds into it (``facts.folds_into``:
    AsyncLLM init > Overall Loading > AsyncMPClient init) shares its bar with that child, when both are of one
    colour and status. Waiting spans never join a chain."""
    ids = {s.span_id for s in lane.spans}
    rows: dict[str, int] = {}
    chains: dict[str, list[Span]] = {}

    def walk(s: Span, d: int) -> None:
        for c in s.children:
            if c.span_id not in ids or c.span_id in rows:
                continue
            chain = [c]
            while True:
                tail = chain[-1]
                inner = [k for k in tail.children if k.span_id in ids and not k.attrs.get(sc.WAITING)]
                big = [k for k in inner if folds_into(tail, k)]
                if len(big) != 1 or tail.attrs.get(sc.WAITING) or big[0].status != tail.status \
                        or _COLOR.get(phase_of(big[0])) != _COLOR.get(phase_of(tail)):
                    break
                chain.append(big[0])
            rows[c.span_id] = d
            chains[c.span_id] = chain
            for member in chain[1:]:
                rows[member.span_id] = -1  # drawn with the chain head
            for member in chain:
                walk(member, d + 1)

    walk(lane.span, 0)
    for s in lane.spans:  # spans whose parent sits in another lane
        if s.span_id not in rows and s is not lane.span:
            rows[s.span_id] = 0
            chains[s.span_id] = [s]
    return rows, chains


def tooltip(s: Span, t0: int, total: float) -> str:
    lines = [f"{s.name}  [{KIND_LABEL.get(s.attrs.get(sc.PROCESS_KIND, ''), '?')}]",
             f"phase {phase_of(s) or '?'}: {seconds(s.duration)} ({100 * s.duration / max(total, 1e-9):.1f} % of "
             f"the start), from {(s.start - t0) / 1e9:.2f} s to {(s.end - t0) / 1e9:.2f} s"]
    if s.attrs.get(sc.WAITING):
        lines.append("waiting for another process")
    lines += cause_labels(s)
    for key in (sc.RES_CPU_TIME, sc.RES_CORES_AVG, sc.RES_CORES_PEAK, sc.RES_RSS_PEAK, sc.RES_DISK_READ,
                sc.RES_DISK_READ_GBPS, sc.RES_GPU_MEMORY_DELTA):
        if key in s.attrs:
            lines.append(f"{key.rsplit('.', 1)[-1]}: {s.attrs[key]}")
    return "\n".join(lines)


class _Axis:
    """The shared time axis: nanoseconds to x pixels."""

    def __init__(self, t0: int, total: float) -> None:
        self.t0, self.total, self.plot = t0, total, WIDTH - LEFT - RIGHT

    def __call__(self, ns: int) -> float:
        return LEFT + self.plot * ((ns - self.t0) / 1e9) / self.total


def scene(st: Start) -> Scene:
    spans, root, f = st.spans, st.root, st.facts
    t0 = min(s.start for s in spans)
    x = _Axis(t0, max((max(root.end, max(s.end for s in spans)) - t0) / 1e9, 1e-6))
    sc_ = Scene(WIDTH, 0)
    _header(sc_, f, root.trace_id)
    axis_y = 84
    has_cpu = any(sc.RES_CORES_AVG in s.attrs for s in spans)
    y = axis_y + 14
    lane_top: dict[str, float] = {}
    row_y: dict[str, float] = {}
    for ln in st.lanes:
        lane_top[ln.span.span_id] = y
        y += _lane(sc_, ln, y, x, has_cpu, len(lane_top) % 2 == 1, row_y) + LANE_GAP
    bottom = y - LANE_GAP
    step = _nice_step(x.total, x.plot)
    for k in range(int(x.total / step) + 1):
        gx = x(t0 + int(k * step * 1e9))
        sc_.add(Line(gx, axis_y + 6, gx, bottom, "#dde3e8"), 1)
        sc_.add(Text(gx, axis_y, f"{k * step:g} s", 11, "#555", anchor="middle"))
    for ln in st.lanes:  # spawn connectors: from the spawning span's lane to the new process's lane
        parent_row = row_y.get(ln.span.parent_id or "")
        if parent_row is not None:
            sx = x(ln.span.start)
            sc_.add(Line(sx, parent_row + BAR, sx, lane_top[ln.span.span_id] + 2, "#546e7a", 1.2, dash=True))
    ready, ok = x(root.end), f.outcome == "ready"
    sc_.add(Line(ready, axis_y + 6, ready, bottom, "#2e7d32" if ok else ERROR, 1.5))
    sc_.add(Text(min(ready, WIDTH - 4), bottom + 10, "ready" if ok else f.outcome, 11, "#2e7d32" if ok else ERROR,
                 anchor="end", bold=True))
    used = {_COLOR.get(phase_of(s), OTHER) for s in spans}
    y = _legend(sc_, bottom + 28, has_cpu, used, any(s.attrs.get(sc.WAITING) for s in spans))
    y = _notes(sc_, y + 6, st)
    sc_.height = y + 12
    return sc_


def _header(sc_: Scene, f: Facts, trace_id: str) -> None:
    head = f"vLLM startup: {'ready in' if f.outcome == 'ready' else f.outcome.upper() + ' after'} {seconds(f.total)}"
    sc_.add(Text(16, 20, head, 18, bold=True))
    sub = " · ".join(b for b in (f.model, f"{f.mode} cache root" if f.mode else "", f.device_model or f.device or "",
                                 f"vLLM {f.vllm_version}" if f.vllm_version else "", f"trace {trace_id}") if b)
    sc_.add(Text(16, 42, fit(sub, 12, WIDTH - 32), 12, "#555"))
    if f.error:
        sc_.add(Text(16, 62, fit(f"failed in {f.error_phase}: {f.error}", 12, WIDTH - 32), 12, ERROR, bold=True))


def _lane(sc_: Scene, ln: Lane, y: float, x: _Axis, has_cpu: bool, shaded: bool, row_y: dict[str, float]) -> float:
    """One process's lane at ``y``: its bars (each chain one bar), gaps and CPU strip; returns its height."""
    depth_of, chains = _rows(ln)
    rows = 1 + max(depth_of.values(), default=0)
    height = rows * ROW + (CPU_STRIP + 4 if has_cpu else 0) + 8
    sc_.add(Rect(0, y, WIDTH, height, "#fafafa" if shaded else "#ffffff"), 0)
    sc_.add(Rect(x(ln.span.start), y + 2, max(x(ln.span.end) - x(ln.span.start), 1), height - 4, "#eef3f8",
                 title=tooltip(ln.span, x.t0, x.total)), 0)
    label = KIND_LABEL.get(ln.kind, ln.kind) + (f" {ln.rank}" if ln.rank is not None else "")
    sc_.add(Text(12, y + 12, label, 13, bold=True))
    sc_.add(Text(12, y + 28, fit(f"{seconds(ln.span.duration)}" + (f" · pid {ln.pid}" if ln.pid else ""), 11,
                                 LEFT - 20), 11, "#555"))
    for s in ln.spans:
        row = depth_of.get(s.span_id, 0)
        if s is ln.span or row < 0:
            continue
        chain = chains.get(s.span_id, [s])
        by = y + 4 + row * ROW
        for member in chain:
            row_y[member.span_id] = by
        failed = any(m.status == 2 for m in chain)
        bx, bw = x(s.start), max(x(s.end) - x(s.start), 3.0 if failed else 1.0)
        waiting = bool(s.attrs.get(sc.WAITING))
        fill = WAIT_FILL if waiting else _COLOR.get(phase_of(s), OTHER)
        tip = "\n\n".join(tooltip(m, x.t0, x.total) for m in chain)
        sc_.add(Rect(bx, by, bw, BAR, fill, stroke=ERROR if failed else ("#9e9e9e" if waiting else "#ffffff"),
                     stroke_width=2 if failed else 0.5, hatch=WAIT_HATCH if waiting else None, title=tip))
        shown = _label(chain, bw - 6)
        if shown:
            sc_.add(Text(bx + 3, by + BAR / 2, shown, 11, ERROR if failed else "#222", title=tip))
    _gaps(sc_, ln, y + 4, x, x.total)
    if has_cpu:
        _cpu_strip(sc_, ln, y + rows * ROW + 4, x)
    return height


def _label(chain: list[Span], room: float) -> str:
    """The longest of: all names with duration and first cause; the last name with both; names only."""
    head, tail = chain[0], chain[-1]
    dur = seconds(head.duration)
    causes = [c for m in chain for c in cause_labels(m)]
    cause = f" · {causes[0]}" if causes else ""
    names = " › ".join(m.name for m in chain)
    wait = " (waiting)" if head.attrs.get(sc.WAITING) else ""
    for text in (f"{names}{wait} {dur}{cause}", f"{names}{wait} {dur}", f"{head.name}{wait} {dur}{cause}",
                 f"{head.name}{wait} {dur}", f"{tail.name} {dur}"):
        if text_width(text, 11) <= room:
            return text
    return fit(head.name, 11, room)


def _gaps(sc_: Scene, ln: Lane, top: float, x: Callable[[int], float], total: float) -> None:
    """Time inside the process span that none of its spans covers (at least 0.1 % of the start and 30 ms)."""
    kids = [(s.start, s.end, s.name) for s in ln.spans if s is not ln.span]
    for a, b, _ in gaps(kids, ln.span.start, ln.span.end):
        _gap(sc_, a, b, top, x, total)


def _gap(sc_: Scene, a: int, b: int, top: float, x: Callable[[int], float], total: float) -> None:
    dur = (b - a) / 1e9
    if dur < max(0.03, 0.001 * total):
        return
    sc_.add(Rect(x(a), top, max(x(b) - x(a), 2), BAR, GAP_FILL, stroke=GAP_HATCH, stroke_width=0.5, hatch=GAP_HATCH,
                 title=f"unexplained: {seconds(dur)} of this process that no span covers"))


def _cpu_strip(sc_: Scene, ln: Lane, top: float, x: Callable[[int], float]) -> None:
    leaves = [s for s in ln.spans if s is not ln.span and not s.children and sc.RES_CORES_AVG in s.attrs]
    if not leaves:
        return
    peak = max([1.0] + [float(s.attrs.get(sc.RES_CORES_PEAK, 0) or 0) for s in leaves]
               + [float(s.attrs[sc.RES_CORES_AVG] or 0) for s in leaves])
    sc_.add(Text(LEFT - 8, top + CPU_STRIP / 2, f"CPU (max {peak:.1f} cores)", 10, "#777", anchor="end"))
    sc_.add(Line(LEFT, top + CPU_STRIP, WIDTH - RIGHT, top + CPU_STRIP, "#cfd8dc"))
    for s in leaves:
        cores = float(s.attrs[sc.RES_CORES_AVG] or 0)
        h = CPU_STRIP * min(cores / peak, 1.0)
        if h > 0.3:
            sc_.add(Rect(x(s.start), top + CPU_STRIP - h, max(x(s.end) - x(s.start), 1), h, "#607d8b",
                         title=f"{s.name}: {cores:.2f} cores avg" + (
                             f", peak {s.attrs[sc.RES_CORES_PEAK]}" if sc.RES_CORES_PEAK in s.attrs else "")))


def _legend(sc_: Scene, y: float, has_cpu: bool, used: set[str], waiting: bool) -> float:
    items: list[tuple[str, str, str | None]] = [(name, color, None) for name, color, _ in CATEGORIES if color in used]
    if waiting:
        items.append(("waiting for another process", WAIT_FILL, WAIT_HATCH))
    items.append(("unexplained: no span covers it", GAP_FILL, GAP_HATCH))
    items.append(("failed", "#ffffff", None))
    lx = 16
    for name, color, hatch in items:
        w = 14 + 6 + text_width(name, 11) + 18
        if lx + w > WIDTH - 16:
            lx, y = 16, y + 20
        failed = name == "failed"
        sc_.add(Rect(lx, y - 6, 14, 12, color, stroke=ERROR if failed else "#9e9e9e", stroke_width=2 if failed else 0.5,
                     hatch=hatch))
        sc_.add(Text(lx + 20, y, name, 11, "#444"))
        lx += w
    if has_cpu:
        y += 20
        sc_.add(Text(16, y, "CPU strips: cores each leaf phase kept busy in its process (resource sampler)", 11,
                     "#444"))
    return y + 14


def _notes(sc_: Scene, y: float, st: Start) -> float:
    lines: list[tuple[str, str, bool]] = []
    causes = key_causes(st.facts)
    if causes:
        lines.append(("causes: " + " · ".join(causes), "#333", False))
    cp = st.critical_path  # several processes of a kind: the one ready last, and where ranks waited for a rank
    waits = [w for w in cp.rank_waits if w.arrived_last][:1] + [w for w in cp.rank_waits if not w.arrived_last][:1]
    for text in [x.text() for x in cp.stragglers] + [w.text() for w in waits]:
        lines.append((text, "#333", False))
    for note in st.observations:
        lines.append(("note: " + note, "#555", False))
    for a in st.advice[:3]:
        lines.append((f"advice: {a.headline()}", "#1b5e20", True))
        lines.append((f"because [{a.phase}]: {a.evidence}", "#555", False))
    for text, color, bold in lines:
        for n, chunk in enumerate(_wrap(text, WIDTH - 48, 12)):
            y += 18
            sc_.add(Text(16 if n == 0 else 40, y, chunk, 12, color, bold=bold))
    return y


def _wrap(text: str, px: float, size: float) -> list[str]:
    return textwrap.wrap(text, width=max(20, int(px / (size * 0.62)))) or [""]


HTML_STYLE = """
body{font-family:DejaVu Sans,Verdana,Arial,sans-serif;margin:16px;color:#222;background:#fff}
.chart{border:1px solid #e0e0e0;min-width:900px}
.chart svg{display:block;width:100%;height:auto}
g.bar:hover rect,g.label:hover text{opacity:.75}
pre{font-size:12px;background:#f7f7f7;padding:8px;overflow-x:auto}
h2{font-size:15px;margin:18px 0 6px}
.hint{color:#666;font-size:12px}
"""


def html(st: Start, title: str | None = None) -> str:
    body = (f"<div class=\"chart\">{scene(st).svg()}</div>\n"
            f"<p class=\"hint\">Hover a bar for its phase, times, causes and resources. Source: "
            f"{escape(st.source)}</p>\n"
            f"<h2>Phase tree</h2><pre>{escape(phase_tree.render(st))}</pre>\n")
    return html_page.page(title or f"vLLM startup {st.trace_id}", HTML_STYLE, body)


def write_html(st: Start, path: str) -> None:
    html_page.write_text(path, html(st))


def write_png(st: Start, path: str) -> None:
    scene(st).png(path)
