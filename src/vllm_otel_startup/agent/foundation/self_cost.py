"""What the agent itself cost a process up to its ready point (``OTEL_PYTHON_VLLM_STARTUP_DEBUG=true``: one line on
stderr per process; benchmarks/vllm_log.py reads it from the serve log).

- CPU seconds of every Python thread but the main one, by name (ours: ``vllm-otel-startup-*``; the SDK's batch span
  processor and metric reader), from ``/proc/self/task/<tid>/stat``. Python code on them holds the GIL, so this
  bounds what they can take from vLLM's main thread;
- the sampler's ticks and its thread's CPU per part of a tick (its readings of this process, of the host, the
  discovery of the process tree, the tree's CPU, NVML, its jobs: the in-progress refresh, the metrics export);
- on the main thread: the calls into our span processor and how long they took, and how many garbage collections
  and imports the watchers saw (each a few hundred nanoseconds);
- the whole process's CPU time, for scale.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_NUMBERED = re.compile(r"[-_ ]?\d+$")


class MainThreadCost:
    """Time spent in our span processor (on vLLM's threads); plain integer adds, no lock (a lost increment under a
    race is a rounding error in a debug figure)."""

    __slots__ = ("calls", "ns")

    def __init__(self) -> None:
        self.calls = 0
        self.ns = 0

    def add(self, t0: int) -> None:
        self.calls += 1
        self.ns += time.perf_counter_ns() - t0


def _cpu_s(tid: int) -> float | None:
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)
    except (OSError, IndexError, ValueError):
        return None


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's live Python threads other than the main one, by name (a trailing number
    folded: ``vllm-otel-startup-export-0`` and ``-1`` are one line)."""
    out: dict[str, float] = {}
    main = threading.main_thread()
    for t in threading.enumerate():
        if t is main or not t.native_id:
            continue
        cpu = _cpu_s(t.native_id)
        if cpu is not None:
            name = _NUMBERED.sub("", t.name)
            out[name] = out.get(name, 0.0) + cpu
    return out


def main_thread_switches() -> int | None:
    """The main thread's voluntary context switches so far: each time it waited (for the GIL among others)."""
    try:
        with open(f"/proc/self/task/{threading.main_thread().native_id}/status", "rb") as f:
            for row in f:
                if row.startswith(b"voluntary_ctxt_switches:"):
                    return int(row.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


OURS = ("vllm-otel-startup", "Otel")  # our threads' names, and the SDK's (batch span processor, metric reader)


def line(kind: str, processor: MainThreadCost | None, retro: Any, monitoring: Any = None, nudge: Any = None,
         exports: Any = None, sampler: Any = None) -> str:
    threads = thread_cpu()
    ours = {k: v for k, v in threads.items() if k.startswith(OURS)}
    others = sum(v for k, v in threads.items() if k not in ours)
    parts = [f"[vllm-otel-startup] self-cost {kind} pid {os.getpid()}: process cpu {time.process_time():.2f}s",
             f"agent threads {sum(ours.values()):.2f}s (" + ", ".join(f"{k} {v:.2f}s" for k, v in sorted(ours.items()))
             + f"); other threads {others:.2f}s"]
    if processor is not None:
        parts.append(f"span processor {processor.calls} calls {processor.ns / 1e9:.3f}s")
    if retro is not None:
        parts.append(f"gc callbacks {retro.gc_calls} imports watched {retro.imports}")
    if monitoring is not None:
        parts.append(f"PY_UNWIND callbacks {monitoring.unwinds} switched {monitoring.switches} times")
    if nudge is not None and exports is not None:
        parts.append(f"exports {exports.exports} of {exports.spans} spans, {nudge.flushes} woken by a phase's end")
    if sampler is not None and sampler.ticks:
        parts.append(f"sampler {sampler.ticks} ticks (" + ", ".join(
            f"{k} {v / 1e9:.3f}s" for k, v in sorted(sampler.spent.items())) + ")")
    switches = main_thread_switches()
    if switches is not None:
        parts.append(f"main thread waited {switches} times")
    return "; ".join(parts)
