"""A recorded start as a Chrome Trace Event Format file (``report --trace-event FILE``; ``compare`` writes its two
starts side by side): what Perfetto UI, chrome://tracing and speedscope open, next to PyTorch profiler, py-spy or
viztracer traces.

The object form ``{"traceEvents": [...], "displayTimeUnit": "ms"}``: each process of a start is one track (a
``pid`` of its own, named by kind and rank with ``M`` ``process_name`` events), each span one complete ``X``
event (``ts``/``dur`` in µs from the start's first span; its attributes as ``args``); a waiting span (the project's
``vllm.startup.waiting`` attribute, or a waiting phase id) has category ``waiting`` and ``args.waiting: true``;
the per-phase resource readings (``vllm.startup.resource.*`` on leaf spans) become counter tracks (``C`` events):
the cores a phase kept busy, its peak resident memory and the GPU memory the process holds.

Spans of one process that overlap without nesting (a phase running beside another) go on a second row (``tid``)
of the process: the format draws one row's slices as a stack, so they must nest.
"""

from __future__ import annotations

import json
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.facts import Lane, kind_of, phase_of
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

__all__ = ["COUNTERS", "document", "events", "process_name", "write"]

MIB = 1024 * 1024
# Counter tracks: (track name, series name in args, the attribute read per leaf phase, scale)
COUNTERS = (
    ("CPU cores", "cores", sc.RES_CORES_AVG, 1.0),
    ("RSS peak (MiB)", "MiB", sc.RES_RSS_PEAK, 1.0 / MIB),
    ("GPU memory held (MiB)", "MiB", sc.RES_GPU_MEMORY_DELTA, 1.0 / MIB),
)
_RANK_NAMES = ((sc.WORKER_RANK, "rank"), (sc.DP_RANK, "dp"), (sc.API_SERVER_INDEX, "index"))


def process_name(lane: Lane) -> str:
    """``engine_core (dp 0)``, ``worker (rank 1)``, ``api_server``: the process kind and its rank, if any."""
    kind = lane.kind or kind_of(lane.span) or "process"
    for key, label in _RANK_NAMES:
        v = lane.span.attrs.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{kind} ({label} {v})"
    return kind


def _arg(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else [_arg(x) for x in v] \
        if isinstance(v, (list, tuple)) else str(v)


def _waiting(s: Span) -> bool:
    return bool(s.attrs.get(sc.WAITING)) or phase_of(s) in sc.WAITING_PHASES


def _slice(s: Span, pid: int, tid: int, t0: int) -> dict[str, Any]:
    args = {k: _arg(v) for k, v in s.attrs.items()}
    args["span_id"] = s.span_id
    waiting = _waiting(s)
    if waiting:
        args["waiting"] = True
    if s.status == 2:
        args["error"] = s.status_message or True
    cat = "waiting" if waiting else "phase"
    return {"name": s.name, "cat": cat + (",error" if s.status == 2 else ""), "ph": "X", "pid": pid, "tid": tid,
            "ts": (s.start - t0) / 1000, "dur": max(s.end - s.start, 0) / 1000, "args": args}


def _rows(spans: list[Span]) -> list[tuple[Span, int]]:
    """Each span with the row (tid, from 1) it is drawn on: the first row where it nests in what is open."""
    stacks: list[list[Span]] = []
    out = []
    for s in sorted(spans, key=lambda x: (x.start, -x.end)):
        for n, stack in enumerate(stacks):
            while stack and stack[-1].end <= s.start:
                stack.pop()
            if not stack or stack[-1].end >= s.end:
                stack.append(s)
                out.append((s, n + 1))
                break
        else:
            stacks.append([s])
            out.append((s, len(stacks)))
    return out


def _counters(lane: Lane, pid: int, t0: int) -> list[dict[str, Any]]:
    """Step series per process from its leaf phases' readings: cores and RSS hold for the phase (0 after it);
    GPU memory adds each phase's delta at its end (what the process holds, from its start)."""
    leaves = sorted((s for s in lane.spans if not s.children), key=lambda s: s.start)
    out: list[dict[str, Any]] = []
    for track, series, attr, scale in COUNTERS:
        points: list[tuple[int, int, float]] = []  # (ns, order: an end before a start at the same instant, value)
        held = 0.0
        for s in leaves:
            v = s.attrs.get(attr)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if attr == sc.RES_GPU_MEMORY_DELTA:
                held += v * scale
                points.append((s.end, 1, round(held, 3)))
            else:
                points += [(s.start, 1, round(v * scale, 3)), (s.end, 0, 0.0)]
        if points and attr == sc.RES_GPU_MEMORY_DELTA:
            points.insert(0, (leaves[0].start, 0, 0.0))
        points.sort(key=lambda p: (p[0], p[1]))
        for n, (ns, _, value) in enumerate(points):
            if n + 1 < len(points) and points[n + 1][0] == ns:
                continue  # a phase ending where the next begins: one point, the next one's value
            out.append({"name": track, "ph": "C", "pid": pid, "ts": (ns - t0) / 1000, "args": {series: value}})
    return out


def events(st: Start, first_pid: int = 1, label: str = "") -> list[dict[str, Any]]:
    """The events of one start, its processes numbered from ``first_pid``; ``label`` prefixes process names."""
    t0 = min(s.start for s in st.spans)
    out: list[dict[str, Any]] = []
    for n, lane in enumerate(st.lanes):
        pid = first_pid + n
        name = process_name(lane) + (f" pid {lane.pid}" if lane.pid else "")
        out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"name": f"{label}{name}" if label else name}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        rows = _rows(lane.spans)
        for tid in sorted({t for _, t in rows}):
            out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                        "args": {"name": "phases" if tid == 1 else f"phases (overlapping, row {tid})"}})
        out += [_slice(s, pid, tid, t0) for s, tid in rows]
        out += _counters(lane, pid, t0)
    return out


def document(starts: list[tuple[str, Start]]) -> dict[str, Any]:
    """One trace file for these starts (``label`` per start: "" alone, "A: " / "B: " side by side)."""
    evs: list[dict[str, Any]] = []
    pid = 1
    for label, st in starts:
        evs += events(st, pid, label)
        pid += len(st.lanes)
    meta = {"trace_ids": [st.trace_id for _, st in starts], "sources": [st.source for _, st in starts]}
    return {"traceEvents": evs, "displayTimeUnit": "ms", "otherData": meta}


def write(path: str, starts: list[tuple[str, Start]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document(starts), f, separators=(",", ":"))
