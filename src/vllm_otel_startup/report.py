"""Read a recorded start (OTLP JSON lines) and print its phase tree with durations and coverage."""

from __future__ import annotations

import glob
import json
import os

from . import semconv as sc
from .file_exporter import default_dir
from .intervals import uncovered
from .spanmodel import Span, parse_otlp


class ReportError(Exception):
    pass


def load(path: str) -> list[Span]:
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file")
    spans: list[Span] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                spans.extend(parse_otlp(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise ReportError(f"{path}:{n}: not OTLP JSON ({exc})") from None
    if not spans:
        raise ReportError(f"{path}: no spans")
    return spans


def latest(directory: str | None = None) -> str:
    files = glob.glob(os.path.join(directory or default_dir(), "*.jsonl"))
    if not files:
        raise ReportError(f"no recorded start in {directory or default_dir()}")
    return max(files, key=os.path.getmtime)


def tree(spans: list[Span]) -> Span:
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.name == sc.ROOT_SPAN]
    if not roots:
        raise ReportError("not a vLLM start: no 'vLLM startup' root span")
    for s in spans:
        if s.parent_id in by_id:
            by_id[s.parent_id].children.append(s)
    for s in spans:
        s.children.sort(key=lambda c: c.start)
    return roots[0]


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
        kind = s.attrs.get(sc.PROCESS_KIND, "")
        flags = []
        for key, label in ((sc.COMPILE_CACHE_HIT, "compile cache hit"), (sc.WEIGHTS_SOURCE, "weights"),
                           (sc.WEIGHTS_GBPS, "GB/s"), (sc.MODEL_INSPECTION_CACHE_HIT, "modelinfo cache hit"),
                           (sc.KV_CACHE_BYTES, "KV bytes"), (sc.CUDAGRAPH_COUNT, "graphs")):
            if key in s.attrs:
                flags.append(f"{label}={s.attrs[key]}")
        if s.status == 2:
            flags.append(f"ERROR {s.status_message}")
        lines.append(f"{s.duration:9.3f}s {100 * s.duration / total:5.1f}%  {'  ' * depth}{s.name}"
                     f"  [{kind}]" + (f"  ({', '.join(flags)})" if flags else ""))
        for c in s.children:
            walk(c, depth + 1)

    walk(root, 0)
    share, gap, _ = coverage(root, spans)
    strict, sgap, _ = coverage(root, spans, skip_waiting=True)
    lines.append("")
    lines.append(f"explained: {100 * share:.1f}% of {root.duration:.2f} s by leaf spans "
                 f"(largest gap {gap / 1e9:.3f} s); without waiting spans {100 * strict:.1f}% "
                 f"(largest gap {sgap / 1e9:.3f} s)")
    return "\n".join(lines)


def run(source: str | None) -> int:
    path = source or latest()
    if os.path.isdir(path):
        path = latest(path)
    spans = load(path)
    root = tree(spans)
    print(f"start {root.trace_id}  outcome={root.attrs.get(sc.OUTCOME, '?')}  file={path}")
    print(render(root, spans))
    return 0 if root.attrs.get(sc.OUTCOME) == "ready" else 1
