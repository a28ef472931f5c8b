"""The CPU form's thread snapshots, in the patched GPU driver's threads.json shape (gpu/driver_lanes.diff), so one
analysis (threads.py) reads both: every process of a start at its first /health 200, per thread its CPU seconds
(utime + stime), voluntary and involuntary context switches (a voluntary one: the thread blocked, on the GIL among
others) and page faults; and a 2 Hz timeline of the main threads from the launch (each process's counters at its
first log line). Read from /proc of the launched process and its descendants."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the kernel's per-thread ``children`` lists), parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def thread(task: Path) -> dict:
    """One thread's counters from its /proc task folder (raises OSError/ValueError once it is gone)."""
    stat = (task / "stat").read_text()
    f = stat[stat.rindex(")") + 2:].split()
    st = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
    return {"tid": int(task.name), "comm": stat[stat.index("(") + 1:stat.rindex(")")],
            "cpu_s": (int(f[11]) + int(f[12])) / TICK, "user_s": int(f[11]) / TICK, "sys_s": int(f[12]) / TICK,
            "minflt": int(f[7]), "majflt": int(f[9]), "vcsw": int(st.get("voluntary_ctxt_switches", 0)),
            "ivcsw": int(st.get("nonvoluntary_ctxt_switches", 0))}


def snapshot(root: int, main_only: bool = False) -> list[dict]:
    """The driver's ``at_ready`` list for ``root`` and its descendants: per process its pid, name, command line and
    threads (``main_only``: its main thread alone)."""
    out = []
    for pid in descendants(root):
        d = Path(f"/proc/{pid}")
        try:
            stat = (d / "stat").read_text()
            proc = {"pid": pid, "comm": stat[stat.index("(") + 1:stat.rindex(")")],
                    "cmd": (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160],
                    "threads": []}
            for task in [d / "task" / str(pid)] if main_only else sorted((d / "task").iterdir()):
                with contextlib.suppress(OSError, ValueError):  # a thread gone meanwhile
                    proc["threads"].append(thread(task))
            out.append(proc)
        except (OSError, ValueError):
            pass
    return out


class Recorder:
    """``on_start`` / ``on_ready`` for support/harness.serve: the main threads twice a second from the launch, then
    every thread at ready. ``result``: the driver's threads.json content."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s, self.result = every_s, {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def on_start(self, proc) -> None:  # noqa: ANN001 (a subprocess.Popen)
        t0, timeline = time.time_ns(), []
        self.result = {"timeline": timeline}

        def run() -> None:
            while not self._stop.is_set():
                procs = [{"pid": pr["pid"], "comm": pr["comm"], **{k: v for k, v in th.items() if k != "comm"}}
                         for pr in snapshot(proc.pid, main_only=True) for th in pr["threads"]]
                timeline.append({"t": round((time.time_ns() - t0) / 1e9, 3), "procs": procs})
                self._stop.wait(self.every_s)

        self._stop.clear()
        self._thread = threading.Thread(target=run, name="benchmark-timeline", daemon=True)
        self._thread.start()

    def on_ready(self, proc) -> None:  # noqa: ANN001
        self.result["at_ready"] = snapshot(proc.pid)
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
