"""The fault matrix's stopwatch inside the served processes, owned by the test, not by the agent.

`install_dir` makes a directory that, put on PYTHONPATH, is a tiny distribution with one
`opentelemetry_post_instrument` entry point: OpenTelemetry's own auto-instrumentation (the sitecustomize that
`opentelemetry-instrument` runs in every Python process, spawned children included) calls `install` after it has
loaded every instrumentor. In a process of the start (one where the agent made its runtime), `install` wraps the
agent's ready point from outside: `Runtime.finish` (everything the process's own thread does there) and
`ready.flush` (the bounded wait for the export). Each call is timed with `time.perf_counter_ns` around the call,
and one JSON line per process goes to `$VOS_READY_PROBE_DIR/<pid>.json`.

Why this is independent of the agent's self-report (`OTEL_PYTHON_VLLM_STARTUP_DEBUG`'s "ready-point wait ... ms"):
the clock and the wrappers are this file's; they time the whole call from the caller's side (thread creation,
the join's overshoot, the GIL handed back after the timeout, and in `finish` the span and resource work around
the wait), none of which the agent's own print covers; and they measure the same whether or not the agent
prints, or prints the truth.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ENV = "VOS_READY_PROBE_DIR"
NAME = "vos_ready_probe"


def install_dir(root: Path) -> Path:
    """A PYTHONPATH entry holding this module and the metadata that registers its entry point."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, root / f"{NAME}.py")
    meta = root / f"{NAME}-0.dist-info"
    meta.mkdir(exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: 0\n")
    (meta / "entry_points.txt").write_text(f"[opentelemetry_post_instrument]\n{NAME} = {NAME}:install\n")
    return root


def read(out: Path) -> list[dict]:
    """Every process's record: pid, kind, finish_ms, flush_ms (the wait), wait_s (the bound it was given),
    handover_ms (how late a 1 ms sleep came back right after), run_queue_ms (the kernel's delay of the process's
    threads during the wait)."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def handover_ms(tries: int = 3, nap_s: float = 0.001) -> float:
    """How late this thread comes back from a 1 ms sleep right after the ready point's wait, under the same load
    (other processes on the cores, the process's own threads holding the GIL while they export): the worst of a
    few tries. What any Python code that waits in this thread at this moment pays on top of its wait."""
    worst = 0.0
    for _ in range(tries):
        t0 = time.perf_counter_ns()
        time.sleep(nap_s)
        worst = max(worst, (time.perf_counter_ns() - t0) / 1e6 - 1e3 * nap_s)
    return worst


def run_queue_ns() -> dict[str, int]:
    """Per thread of this process: its time runnable but waiting for a CPU (Linux schedstat); empty where the
    kernel does not say."""
    out = {}
    for task in Path("/proc/self/task").glob("*"):
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def run_queue_since(before: dict[str, int]) -> float:
    """ms the kernel kept this process's threads off a CPU since ``before`` (threads started since count from 0;
    one that ended since, not at all). All threads, not only the waiting one: a thread that holds the GIL and is
    taken off its CPU keeps the waiting thread from coming back as surely as the run queue does."""
    return sum(ns - before.get(tid, 0) for tid, ns in run_queue_ns().items()) / 1e6


def install() -> None:
    out = os.environ.get(ENV)
    runtime = sys.modules.get("vllm_otel_startup.agent.runtime")
    ready = sys.modules.get("vllm_otel_startup.agent.export.ready")
    if not out or runtime is None or ready is None:
        return  # not a process of the start (the agent leaves helpers alone: so does the probe)
    seen: dict = {}
    flush, finish = ready.flush, runtime.Runtime.finish

    def timed_flush(rt, wait_s, *args, **kwargs):
        queued, t0 = run_queue_ns(), time.perf_counter_ns()
        try:
            return flush(rt, wait_s, *args, **kwargs)
        finally:
            seen["flush_ms"] = (time.perf_counter_ns() - t0) / 1e6
            seen["run_queue_ms"] = run_queue_since(queued)  # the kernel kept the threads off a CPU
            seen["wait_s"] = wait_s
            t1 = time.perf_counter_ns()
            seen["handover_ms"] = handover_ms()
            seen["probe_ms"] = (time.perf_counter_ns() - t1) / 1e6  # the probe's own time, not the agent's

    def timed_finish(rt, *args, **kwargs):
        t0 = time.perf_counter_ns()
        try:
            return finish(rt, *args, **kwargs)
        finally:
            took = (time.perf_counter_ns() - t0) / 1e6 - seen.get("probe_ms", 0.0)
            if "flush_ms" in seen and "finish_ms" not in seen:  # the call that ended the start
                seen.update(finish_ms=took, pid=os.getpid(), kind=getattr(getattr(rt, "info", None), "kind", None))
                with contextlib.suppress(OSError):
                    Path(out, f"{os.getpid()}.json").write_text(json.dumps(seen))

    ready.flush = timed_flush
    runtime.Runtime.finish = timed_finish
