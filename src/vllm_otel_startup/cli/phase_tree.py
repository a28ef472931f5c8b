"""The full phase tree of one start as text: every span with duration, share, process, causes and resources,
then the explained share, observations and advice. ``report`` prints it, the waterfall's HTML embeds it."""

from __future__ import annotations

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.facts import cause_labels, kind_of, resource_labels
from vllm_otel_startup.model.facts import leaves as leaf_spans
from vllm_otel_startup.model.intervals import merge, uncovered
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start


def leaves(root: Span, spans: list[Span], skip_waiting: bool = False) -> list[tuple[int, int, str]]:
    """The leaf spans of a linked start (facts.leaves: detail spans never make a phase a parent) as (start, end,
    name), never the root."""
    return [(s.start, s.end, s.name) for s in leaf_spans(spans)
            if s is not root and not (skip_waiting and s.attrs.get(sc.WAITING))]


def coverage(root: Span, spans: list[Span], skip_waiting: bool = False) -> tuple[float, int, int]:
    """Share of the root's wall time covered by the union of leaf spans (of a linked start); largest uncovered
    interval (ns) and where it begins."""
    gap, largest, largest_at, _ = uncovered(leaves(root, spans, skip_waiting), root.start, root.end)
    total = max(root.end - root.start, 1)
    return (total - gap) / total, largest, largest_at


FOLD_AT = 3  # siblings of one name at least this many times (PyTorch's compile regions, one per graph) fold


def render(st: Start, *, detail: bool = False) -> str:
    """The tree; siblings sharing a name FOLD_AT times or more print as one line with their count and time (the
    full list with ``detail``, and in the trace). A child process (each rank's worker) always prints in full."""
    total = max(st.root.duration, 1e-9)
    lines = []
    process = {ln.span.span_id: ln for ln in st.lanes}  # each process's span: never folded
    several: dict[str, int] = {}  # processes of each kind (a single worker needs no rank)
    for ln in st.lanes:
        several[ln.kind] = several.get(ln.kind, 0) + 1

    def line(s: Span, depth: int, name: str, seconds: float, flags: list[str]) -> None:
        lines.append(f"{seconds:9.3f}s {100 * seconds / total:5.1f}%  {'  ' * depth}{name}"
                     f"  [{kind_of(s)}]" + (f"  ({', '.join(flags)})" if flags else ""))

    def walk(s: Span, depth: int) -> None:
        flags = cause_labels(s) + resource_labels(s)
        ln = process.get(s.span_id)
        if ln is not None and ln.rank is not None and several[ln.kind] > 1:  # one of several: which one
            flags.insert(0, f"rank {ln.rank}")
        if s.attrs.get(sc.WAITING):
            flags.insert(0, "waiting")
        line(s, depth, s.name, s.duration, flags)
        counts: dict[tuple[str, str], list[Span]] = {}
        for c in s.children:
            counts.setdefault((c.name, kind_of(c)), []).append(c)
        for c in s.children:
            same = counts[(c.name, kind_of(c))]
            if detail or len(same) < FOLD_AT or c.span_id in process:
                walk(c, depth + 1)
            elif c is same[0]:  # the group's line, where its first member ran
                wall = sum(b - a for a, b in merge((x.start, x.end) for x in same)) / 1e9
                longest = max(x.duration for x in same)
                line(c, depth + 1, f"{c.name} x{len(same)}", wall,
                     [f"folded: longest {longest:.3f} s", "report --detail lists each"])

    walk(st.root, 0)
    share, gap, _ = coverage(st.root, st.spans)
    lines.append("")
    lines.append(st.critical_path.headline(top=5))
    lines.extend(straggler.text() for straggler in st.critical_path.stragglers)
    lines.extend(wait.text() for wait in st.critical_path.rank_waits)
    lines.append(f"(any leaf span, waiting spans included: {100 * share:.1f}%, largest gap {gap / 1e9:.3f} s)")
    for note in st.observations:
        lines.append(f"note: {note}")
    if st.advice:
        lines.append("")
        lines.append(f"advice ({len(st.advice)}):")
        for a in st.advice:
            first, *rest = a.lines()
            lines.append(f"  * {first}")
            lines.extend(f"    {r}" for r in rest)
    return "\n".join(lines)
