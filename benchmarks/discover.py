"""The sampler's process-tree discovery beside a working main thread (issue 58): each /proc file read through ``os``
hands the GIL over and back, and a main thread that works (Python and I/O, as uvicorn's loop serving its first
requests after the handshake) then waits for it. The API server discovers its tree once a second while it waits on
its engine and at every busy tick; a GPU start's EngineCore has ~100 threads, each a ``children`` file. Prints, side
by side over rounds, the main thread's waits (voluntary context switches) and the sampler thread's blocks during
``--discovers`` discoveries of a child of ``--threads`` threads, with those files read the plain way (``read_file``:
open, read, close) and with the GIL held (``ProcFiles.once``, what the sampler does):

    python -m benchmarks discover [--rounds 10] [--threads 100] [--discovers 20]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading

from benchmarks import command_parser
from benchmarks.pairs import rotated

CHILD = "import threading, time\n[threading.Thread(target=time.sleep, args=(600,), daemon=True).start() " \
        "for _ in range({n})]\ntime.sleep(600)"


def switches(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/status") as f:
        return int(f.read().split("voluntary_ctxt_switches:")[1].split()[0])


def trial(held: bool, discovers: int, pipe: tuple[int, int]) -> tuple[int, int, int]:
    """(main-thread waits, sampler-thread blocks, processes found) over ``discovers`` discoveries."""
    from vllm_otel_startup.agent.resources import procfs
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=True)
    if not held:
        s._files.once = procfs.read_file  # noqa: SLF001 - the plain reads, for the comparison
    done, out = threading.Event(), {}

    def run() -> None:
        tid = threading.get_native_id()
        before = switches(tid)
        for _ in range(discovers):
            s._discover(s._files)  # noqa: SLF001 - what a tick does
        out["blocks"] = switches(tid) - before
        done.set()

    main = threading.main_thread().native_id
    before, (r, w), x = switches(main), pipe, 0
    threading.Thread(target=run, daemon=True).start()
    while not done.is_set():  # a working main thread: I/O (the GIL released and taken back) and Python
        os.write(w, b"x")
        os.read(r, 1)
        for _ in range(200):
            x += 1
    return switches(main) - before, out["blocks"], len(s._tree)  # noqa: SLF001


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("discover", __doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--discovers", type=int, default=20)
    a = ap.parse_args(argv)
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(n=a.threads)])
    try:
        while len(os.listdir(f"/proc/{child.pid}/task")) < a.threads + 1:
            threading.Event().wait(0.05)
        pipe, got = os.pipe(), {False: [], True: []}
        for r in range(a.rounds):
            for held in rotated((True, False), r):  # the order flipped every round
                got[held].append(trial(held, a.discovers, pipe))
    finally:
        child.kill()
    print(f"{a.rounds} rounds of {a.discovers} discoveries of a child of {a.threads} threads, beside a working main "
          f"thread (medians, [min-max]):")
    for held, label in ((False, "plain reads (read_file)"), (True, "GIL held (ProcFiles.once)")):
        waits, blocks, found = zip(*got[held], strict=True)
        print(f"  {label:27s} main-thread waits {statistics.median(waits):6.1f} [{min(waits)}-{max(waits)}]   "
              f"sampler blocks {statistics.median(blocks):6.1f} [{min(blocks)}-{max(blocks)}]   child found "
              f"{sum(1 for f in found if f)} of {len(found)}")
