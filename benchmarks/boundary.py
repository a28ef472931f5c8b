"""A span's start and end on vLLM's thread beside threads that want the GIL (issue 58): each reading of
/proc/self/statm and /proc/self/io through ``os.pread`` releases the GIL for the syscall, a thread waiting for it
takes it, and vLLM's thread then waits to get it back (the EngineCore of a GPU start has ~100 threads, an EngineCore
makes ~250 span boundaries). Prints, side by side over rounds, the main thread's waits (voluntary context switches)
while it takes ``--boundaries`` readings between bits of Python work, beside ``--threads`` threads that each wake
every millisecond for a bit of Python, with those files read through ``os.pread`` and through the thread's own
GIL-held pread (``procfs.thread_pread``, what the agent does):

    python -m benchmarks boundary [--rounds 10] [--threads 4] [--boundaries 500]
"""

from __future__ import annotations

import statistics
import threading
import time

from benchmarks import command_parser
from benchmarks.discover import switches
from benchmarks.pairs import rotated


def trial(held: bool, boundaries: int, others: int) -> int:
    """The main thread's waits over ``boundaries`` readings beside ``others`` GIL-hungry threads."""
    from vllm_otel_startup.agent.resources import procfs

    procfs._READERS.pread = procfs.held_pread() if held else procfs.os_pread  # noqa: SLF001
    stop = threading.Event()

    def hungry() -> None:  # a thread of vLLM's: wakes often, a little Python each time
        while not stop.is_set():
            time.sleep(0.001)
            sum(range(50))

    threads = [threading.Thread(target=hungry, daemon=True) for _ in range(others)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    main = threading.main_thread().native_id
    before, x = switches(main), 0
    for _ in range(boundaries):
        procfs.rss_bytes()  # what a span's start or end reads (sampler.snapshot)
        procfs.io_bytes()
        for _ in range(2000):  # vLLM's own work between two boundaries
            x += 1
    waits = switches(main) - before
    stop.set()
    for t in threads:
        t.join()
    return waits


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("boundary", __doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--boundaries", type=int, default=500)
    a = ap.parse_args(argv)
    got: dict[bool, list[int]] = {False: [], True: []}
    for r in range(a.rounds):
        for held in rotated((True, False), r):  # the order flipped every round
            got[held].append(trial(held, a.boundaries, a.threads))
    print(f"{a.rounds} rounds of {a.boundaries} span-boundary readings beside {a.threads} threads that want the GIL "
          f"every millisecond (main-thread waits, medians [min-max]):")
    for held, label in ((False, "os.pread (GIL released)"), (True, "GIL held (thread_pread)")):
        w = got[held]
        print(f"  {label:25s} {statistics.median(w):7.1f} [{min(w)}-{max(w)}]")
