"""The readiness estimate of a start still running, from recorded starts of the same model and configuration.

History is what the local file exporter recorded on this node (``OTEL_PYTHON_VLLM_STARTUP_DIR``) plus any
directory or glob ``OTEL_PYTHON_VLLM_STARTUP_HISTORY`` names (a fleet's shared corpus: the format ``predict``
reads). A recorded start matches when it reached ready with the same model, the same start mode (cold / warm
cache root) and, where both sides know them, the same configuration facts and command line (host and port
aside). The newest ``LIMIT`` matches count.

The estimate walks the timeline: phases done count as done, the current phase is expected to take its usual
time (the median of its duration in the matches, the same occurrence of that phase in the same process kind),
and the rest of the start its usual time (the median time from that phase's end to ready). A phase the matches
never ran falls back to the phase that encloses it. No match, no number: ``estimate`` returns None.

Stdlib only and no I/O beyond reading the files: the API server loads it on its in-progress thread.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import corpus
from vllm_otel_startup.model.argv import model_name
from vllm_otel_startup.model.spanmodel import Span, parse_text

LIMIT = 5  # newest matching starts used
MAX_FILES = 40  # newest files read (bounds the one-time cost in a starting server)
# configuration facts that must agree where both the running start and the recorded one know them
CONFIG_FACTS = (sc.ENFORCE_EAGER, sc.COMPILATION_MODE, sc.DTYPE, sc.MAX_MODEL_LEN, sc.TP_SIZE, sc.PP_SIZE,
                sc.DP_SIZE, sc.VLLM_VERSION)
_NOT_CONFIG = frozenset({"--host", "--port"})  # flags that differ between pods of one configuration


def config_key(args: Sequence[str] | None) -> tuple[str, ...] | None:
    """A (redacted) command line without its program and the flags that differ between pods (host, port)."""
    if not args:
        return None
    out: list[str] = []
    skip = False
    for a in list(args)[1:]:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in _NOT_CONFIG:
            skip = "=" not in a
            continue
        out.append(a)
    return tuple(out)


@dataclass
class Recorded:
    """One recorded ready start, reduced to what the estimate reads."""

    trace_id: str
    end: int  # ns: the root's end (ready)
    start: int
    attrs: dict[str, Any]  # the root's attributes
    phases: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)  # (kind, phase) -> spans

    @property
    def duration(self) -> float:
        return (self.end - self.start) / 1e9


def recorded(spans: Iterable[Span]) -> list[Recorded]:
    """The ready starts among these spans (one per trace with a ``vLLM startup`` root)."""
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out = []
    for tid, group in by_trace.items():
        roots = [s for s in group if s.name == sc.ROOT_SPAN and not s.parent_id]
        if not roots or roots[0].attrs.get(sc.OUTCOME) != "ready":
            continue
        root = roots[0]
        r = Recorded(tid, root.end, root.start, dict(root.attrs))
        for s in group:
            phase = s.attrs.get(sc.PHASE)
            kind = s.attrs.get(sc.PROCESS_KIND)
            if phase and kind and phase not in sc.DETAIL_PHASES and s.end >= s.start:
                r.phases.setdefault((str(kind), str(phase)), []).append((s.start, s.end))
        for v in r.phases.values():
            v.sort()
        out.append(r)
    return out


def load(sources: Iterable[str], skip_trace: str = "") -> list[Recorded]:
    """Every ready start in the newest files of these directories / globs / files; unreadable files are skipped."""
    out: list[Recorded] = []
    for path in corpus.newest_first(corpus.files(sources))[:MAX_FILES]:
        if skip_trace and os.path.basename(path).startswith(skip_trace):
            continue
        try:
            out.extend(recorded(parse_text(corpus.read_text(path), path)))
        except Exception:  # noqa: BLE001 - a bad file is no history, never an error
            continue
    return out


def _same_model(a: Any, b: Any) -> bool:
    return bool(a) and bool(b) and (a == b or model_name(a) == model_name(b))


def matching(history: Iterable[Recorded], facts: Mapping[str, Any], args: Sequence[str] | None = None,
             limit: int = LIMIT) -> list[Recorded]:
    """The newest ``limit`` recorded starts of the same model, mode and configuration as ``facts`` / ``args``."""
    key = config_key(args)
    out = []
    for r in history:
        a = r.attrs
        if not _same_model(facts.get(sc.MODEL), a.get(sc.MODEL)) or facts.get(sc.MODE) != a.get(sc.MODE):
            continue
        if any(facts.get(k) is not None and a.get(k) is not None and str(facts[k]) != str(a[k])
               for k in CONFIG_FACTS):
            continue
        theirs = config_key(a.get(sc.COMMAND_ARGS))
        if key is not None and theirs is not None and key != theirs:
            continue
        out.append(r)
    out.sort(key=lambda r: r.end, reverse=True)
    return out[:limit]


@dataclass
class Estimate:
    kind: str  # the process kind of the phase the estimate is made from
    phase: str
    name: str  # its span name
    phase_elapsed: float  # s in that phase so far
    usual: float  # s: the phase's usual duration
    remaining: float  # s: expected time to ready
    history: int  # recorded starts it is made from

    def as_dict(self) -> dict[str, Any]:
        return {"process_kind": self.kind, "phase": self.phase, "name": self.name,
                "phase_elapsed_s": round(self.phase_elapsed, 3), "usual_s": round(self.usual, 3),
                "remaining_s": round(self.remaining, 3), "history": self.history}


def where(processes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The open phases of a start's processes (each ``live.Live.snapshot``), newest first, waiting ones left out:
    the first is where the start is now."""
    entries = [dict(e, process_kind=p["process_kind"]) for p in processes for e in p.get("stack", [])
               if not e.get("waiting")]
    return sorted(entries, key=lambda e: -e["start_ns"])


def estimate(matches: Sequence[Recorded], processes: Sequence[Mapping[str, Any]]) -> Estimate | None:
    """Expected time to ready of a start whose processes are in ``processes`` (see the module docstring)."""
    if not matches:
        return None
    for e in where(processes):
        kind, phase, n = e["process_kind"], e["phase"], int(e.get("occurrence", 0))
        durations, after = [], []
        for r in matches:
            spans = r.phases.get((kind, phase), [])
            if n < len(spans):
                s, end = spans[n]
                durations.append((end - s) / 1e9)
                after.append(max(0.0, (r.end - end) / 1e9))
        if not durations:
            continue  # the matches never ran this phase (this often): the enclosing one
        usual = statistics.median(durations)
        elapsed = float(e["elapsed_s"])
        return Estimate(kind, phase, str(e.get("name") or phase), elapsed, usual,
                        max(usual - elapsed, 0.0) + statistics.median(after), len(durations))
    return None


def _s(x: float) -> str:
    return f"{x:.1f} s" if x < 10 else f"{x:.0f} s"


def progress_line(processes: Sequence[Mapping[str, Any]], est: Estimate | None, elapsed: float,
                  history: int) -> str:
    """The one-line progress message: ``starting: torch.compile 41 s of ~55 s, ready in ~70 s``."""
    here = where(processes)
    if est is not None:
        return (f"vllm-otel-startup: starting: {est.name} {_s(est.phase_elapsed)} of ~{_s(est.usual)}, ready in "
                f"~{_s(est.remaining)} ({_s(elapsed)} since start; from {est.history} recorded start"
                f"{'s' if est.history != 1 else ''})")
    now = f"{here[0]['name']} {_s(float(here[0]['elapsed_s']))}" if here else "?"
    why = ("no recorded start of this model and configuration" if not history
           else "the recorded starts never ran this phase")
    return f"vllm-otel-startup: starting: {now} ({_s(elapsed)} since start); {why}: no estimate"
