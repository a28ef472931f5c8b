"""Benchmark only (issue 25): one stderr line per full garbage collection, in every Python process of BOTH arms of
a GPU overhead queue, so the two arms' collections can be counted alike (the agent's own "Garbage collection" spans
exist in the instrumented arm only). Installed on the GPU machine for a whole queue, before stage2's driver runs, by
benchmarks/gpu/prepare.sh: a ``.pth`` in the base interpreter's site-packages (``import vos_gccount``).

Every process (API server, EngineCore, helpers) then writes, per full collection, a line to its stderr (the start's
serve.log) with ``os.write`` (no buffered stream: a collection may come while the thread writes to one):
``vos-gc pid=N wall=EPOCH_S dur=S n=GEN0,GEN1,GEN2 collected=N argv=...`` (n: collections of each generation so
far). ``python -m benchmarks overhead gpu`` counts them per process (full_gc.* and full_gc_s.* per start).
"""

import gc
import os
import sys
import time

_counts = [0, 0, 0]
_started = [0.0]


def _callback(phase: str, info: dict) -> None:
    generation = info.get("generation", 0)
    if phase == "start":
        _counts[generation] += 1
        _started[0] = time.perf_counter()
        return
    if generation == 2:
        took = time.perf_counter() - _started[0]
        n0, n1, n2 = _counts
        argv = " ".join(sys.argv[:1])[-40:]
        os.write(2, (f"vos-gc pid={os.getpid()} wall={time.time():.3f} dur={took:.4f} n={n0},{n1},{n2} "
                     f"collected={info.get('collected', 0)} argv={argv}\n").encode())


gc.callbacks.append(_callback)
