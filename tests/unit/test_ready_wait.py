"""The ready point's bounded wait, timed from outside like the fault matrix times it (tests/e2e/ready_probe.py):
the caller's thread is back within the budget even when the flush thread keeps the interpreter busy (a plain
``join(budget)`` came back one or two GIL switch intervals late: thread start and hand-back)."""

from __future__ import annotations

import statistics
import threading
import time
from types import SimpleNamespace

from vllm_otel_startup.agent import ready

BUDGET_S = 0.025  # OTEL_PYTHON_VLLM_STARTUP_FLUSH_MS's default


def busy(seconds: float) -> None:
    t = time.monotonic()
    while time.monotonic() - t < seconds:  # pure Python: holds the GIL but for the interpreter's switches
        pass


def timed_flushes(runs: int = 7) -> list[float]:
    done = threading.Event()
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: (busy(0.1), done.set())),
                         info=SimpleNamespace(kind="worker"))
    took = []
    for _ in range(runs):
        done.clear()
        t0 = time.perf_counter()
        ready.flush(rt, BUDGET_S, before=lambda: busy(0.02))  # publish's work, then an export that outlasts the wait
        took.append(time.perf_counter() - t0)
        assert done.wait(5)  # the export went on after the wait, and finished
    return took


def test_a_busy_flush_thread_does_not_stretch_the_wait_past_its_budget():
    took = timed_flushes()
    assert statistics.median(took) <= BUDGET_S, [round(1e3 * t, 1) for t in took]
    assert min(took) >= BUDGET_S / 5  # it does wait (the export gets its head start), it is not skipped


def test_an_export_that_finishes_early_ends_the_wait_early():
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: None),
                         info=SimpleNamespace(kind="worker"))
    t0 = time.perf_counter()
    ready.flush(rt, 5.0)  # a failing start's long budget: nothing to wait for here
    assert time.perf_counter() - t0 < 1.0
