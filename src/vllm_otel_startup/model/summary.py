"""The compact breakdown printed when the server is ready: the phase tree with durations, share of the
start and the process each phase ran in, the key causes, and the top advice.

    from vllm_otel_startup.model import summary
    if summary.enabled():
        logger.info("%s", summary.render(spans))

``render`` never raises, reads nothing but its arguments, and imports only the standard library (cheap enough
for the ready point). ``OTEL_PYTHON_VLLM_STARTUP_SUMMARY=0`` turns the printout off.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import replace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.model.facts import (
    KIND_LABEL,
    Facts,
    cause_labels,
    find_root,
    folds_into,
    key_causes,
    kind_of,
    rank_of,
    seconds,
)
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

ENV = settings.SUMMARY.name


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``OTEL_PYTHON_VLLM_STARTUP_SUMMARY`` is false (settings' one boolean grammar); on by default."""
    return settings.flag(settings.SUMMARY, environ)


def render(spans: list[Span], *, width: int = 110, advice: int = 1, source: str | None = None) -> str:
    """The compact breakdown of one start; never raises (odd input gives a one-line note instead)."""
    try:
        own = [replace(s, children=[]) for s in spans]  # a Start links its spans: leave the caller's alone
        for s in own:  # still open (the root at the very ready point): up to the latest end seen
            if s.end < s.start:
                s.end = max([s.start] + [x.end for x in own])
        if find_root(own) is None:
            return f"vllm-otel-startup: no startup summary ({len(spans)} spans, no '{sc.ROOT_SPAN}' root span)"
        return render_start(Start(own, source or ""), width=max(60, int(width)), advice=advice)
    except Exception as exc:  # noqa: BLE001 - printed from inside the server: never fail the caller
        return f"vllm-otel-startup: no startup summary ({exc.__class__.__name__}: {exc})"


def render_start(st: Start, *, width: int = 110, advice: int = 1) -> str:
    """The compact breakdown of a built start (``render`` for a plain list of spans)."""
    root, f = st.root, st.facts
    rows, hidden = _rows(st)
    lines = [_clip(_header(f, root), width)]
    total = max(root.duration, 1e-9)
    for chain, depth, proc in rows:
        s, name = chain[0], " > ".join(c.name for c in chain)
        causes = [c for member in chain for c in cause_labels(member)]
        text = f"{seconds(s.duration):>8} {100 * s.duration / total:4.0f}%  {proc:<11} {'  ' * depth}{name}"
        if causes:
            text += "  (" + ", ".join(causes) + ")"
        lines.append(_clip(text, width))
    key = key_causes(f)
    if key:
        lines += _wrap("causes: ", " · ".join(key), width)
    lines += _wrap("", st.critical_path.headline(top=2), width)
    for straggler in st.critical_path.stragglers:
        lines += _wrap("", straggler.text(), width)
    for wait in st.critical_path.rank_waits[:1]:
        lines += _wrap("", wait.text(), width)
    for note in st.observations[:1]:
        lines += _wrap("note: ", note, width)
    for a in st.advice[:advice]:
        lines += _wrap("advice: ", a.headline(), width)
        lines += _wrap("        because: ", f"[{a.phase}] {a.evidence}", width)
    if len(st.advice) > advice:
        lines.append(f"(+{len(st.advice) - advice} more: vllm-otel-startup advise)")
    more = f"{hidden} shorter phases not shown; " if hidden else ""
    lines.append(f"({more}full tree: vllm-otel-startup report {st.source or root.trace_id})")
    return "\n".join(lines)


def _rows(st: Start) -> tuple[list[tuple[list[Span], int, str]], int]:
    """The rows shown (a chain of spans folded into one row, its depth, its process) and how many were hidden."""
    threshold = max(0.2, 0.02 * max(st.root.duration, 1e-9))
    by_id = {s.span_id: s for s in st.spans}
    rows: list[tuple[list[Span], int, str]] = []
    hidden = 0

    def visible(s: Span) -> bool:
        if s.status == 2 or _failed_below(s):
            return True
        if s.attrs.get(sc.PHASE) == "torch_compile_stage":  # PyTorch's own regions: in the full report
            return False
        if s.duration < threshold:
            return False
        if s.attrs.get(sc.WAITING):  # shown only when the process it waits for sent no spans
            parent = by_id.get(s.parent_id or "")
            return parent is None or not any(kind_of(c) != kind_of(s) for c in parent.children)
        return True

    def walk(s: Span, depth: int, proc: str) -> None:
        nonlocal hidden
        proc = _process_label(s, proc)
        chain, cur = [s], s
        kids = [c for c in cur.children if visible(c)]
        while len(kids) == 1 and kind_of(kids[0]) == kind_of(cur) and folds_into(cur, kids[0]):
            cur = kids[0]
            chain.append(cur)
            kids = [c for c in cur.children if visible(c)]
        rows.append((chain, depth, proc))
        hidden += sum(1 for c in cur.children if not visible(c))
        for c in kids:
            walk(c, depth + 1, proc)

    walk(st.root, 0, "")
    return rows, hidden


def _process_label(s: Span, parent_label: str) -> str:
    kind = kind_of(s)
    label = KIND_LABEL.get(kind, kind)
    rank = rank_of(s)
    if rank is not None:
        return f"{label} {rank}"
    return parent_label if parent_label.startswith(label) else label


def _wrap(head: str, text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=head, subsequent_indent=" " * len(head),
                         break_on_hyphens=False) or [head]


def _failed_below(s: Span) -> bool:
    stack = list(s.children)
    while stack:
        c = stack.pop()
        if c.status == 2:
            return True
        stack.extend(c.children)
    return False


def _header(f: Facts, root: Span) -> str:
    bits = [f.model]
    if f.mode:
        bits.append(f"{f.mode} cache root")
    bits.append(f.device_model or f.device or "?")
    if f.vllm_version:
        bits.append(f"vLLM {f.vllm_version}")
    if f.outcome == "ready":
        head = f"vLLM startup: ready in {seconds(f.total)}"
    else:
        head = f"vLLM startup: {f.outcome.upper()} after {seconds(f.total)}"
        if f.error_phase:
            head += f" in {f.error_phase}: {f.error}"
    return f"{head}  ({' · '.join(bits)})"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
