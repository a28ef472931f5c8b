"""``vllm-otel-startup report``: one recorded start's phase tree with durations, share, process and causes,
the explained share, observations and advice; optionally the waterfall picture (HTML and/or PNG)."""

from __future__ import annotations

import sys
from typing import TextIO

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model import critical_path
from vllm_otel_startup.model.advice import advise, observe
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import cause_labels, facts, kind_of, link, resource_labels
from vllm_otel_startup.model.intervals import uncovered
from vllm_otel_startup.model.spanmodel import Span, parse_otlp

__all__ = ["ReportError", "Span", "parse_otlp", "load", "latest", "tree", "coverage", "render", "run"]


def load(path: str) -> list[Span]:
    """Every span in a recorded-start file (OTLP JSON lines, an OTLP JSON export or a Tempo response)."""
    return sources.read_file(path)


def latest(directory: str | None = None) -> str:
    return sources.latest_file(directory)


def tree(spans: list[Span]) -> Span:
    root = link(spans)
    if root is None:
        raise ReportError(f"not a vLLM start: no '{sc.ROOT_SPAN}' root span")
    return root


def coverage(root: Span, spans: list[Span], skip_waiting: bool = False) -> tuple[float, int, int]:
    """Share of the root's wall time covered by the union of leaf spans; largest uncovered interval (ns)
    and where it begins."""
    parents = {s.parent_id for s in spans if s.parent_id}
    leaves = [(s.start, s.end, s.name) for s in spans
              if s.span_id not in parents and s is not root and not (skip_waiting and s.attrs.get(sc.WAITING))]
    gap, largest, largest_at, _ = uncovered(leaves, root.start, root.end)
    total = max(root.end - root.start, 1)
    return (total - gap) / total, largest, largest_at


def render(root: Span, spans: list[Span]) -> str:
    total = max(root.duration, 1e-9)
    lines = []

    def walk(s: Span, depth: int) -> None:
        flags = cause_labels(s) + resource_labels(s)
        if s.attrs.get(sc.WAITING):
            flags.insert(0, "waiting")
        lines.append(f"{s.duration:9.3f}s {100 * s.duration / total:5.1f}%  {'  ' * depth}{s.name}"
                     f"  [{kind_of(s)}]" + (f"  ({', '.join(flags)})" if flags else ""))
        for c in s.children:
            walk(c, depth + 1)

    walk(root, 0)
    share, gap, _ = coverage(root, spans)
    lines.append("")
    lines.append(critical_path.analyse(root, spans).headline(top=5))
    lines.append(f"(any leaf span, waiting spans included: {100 * share:.1f}%, largest gap {gap / 1e9:.3f} s)")
    f = facts(root, spans)
    for note in observe(f, spans):
        lines.append(f"note: {note}")
    found = advise(f, spans)
    if found:
        lines.append("")
        lines.append(f"advice ({len(found)}):")
        for a in found:
            first, *rest = a.lines()
            lines.append(f"  * {first}")
            lines.extend(f"    {r}" for r in rest)
    return "\n".join(lines)


def run(source: str | None, *, html: str | None = None, png: str | None = None, tempo_url: str | None = None,
        trace_id: str | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    start = sources.one(source, tempo_url=tempo_url, trace_id=trace_id)
    root = tree(start.spans)
    print(f"start {root.trace_id}  outcome={root.attrs.get(sc.OUTCOME, '?')}  file={start.source}", file=out)
    print(render(root, start.spans), file=out)
    if html or png:
        from vllm_otel_startup.cli import waterfall

        if html:
            waterfall.write_html(start, html)
            print(f"waterfall: {html}", file=out)
        if png:
            waterfall.write_png(start, png)
            print(f"waterfall: {png}", file=out)
    return 0 if root.attrs.get(sc.OUTCOME) == "ready" else 1
