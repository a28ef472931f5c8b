"""The ready point's bounded wait, timed from outside like the fault matrix times it (tests/e2e/ready_probe.py):
the caller's thread is back within the budget even when the flush thread keeps the interpreter busy (a plain
``join(budget)`` came back one or two GIL switch intervals late: thread start and hand-back)."""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from vllm_otel_startup.agent.export import ready

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
    # Up to three rounds of seven: a host loaded by other work (CI140: a median of 54 ms once, 25 ms in CI139 on the
    # same code) delays any thread's hand-back; a wait that overran its budget by design would overrun in every round.
    rounds = []
    for _ in range(3):
        took = timed_flushes()
        assert min(took) >= BUDGET_S / 5  # it does wait (the export gets its head start), it is not skipped
        rounds.append([round(1e3 * t, 1) for t in took])
        if statistics.median(took) <= BUDGET_S:
            break
    else:
        raise AssertionError(f"the wait overran its {1e3 * BUDGET_S:.0f} ms in every round (ms): {rounds}")


def test_an_export_that_finishes_early_ends_the_wait_early():
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: None),
                         info=SimpleNamespace(kind="worker"))
    t0 = time.perf_counter()
    ready.flush(rt, 5.0)  # a failing start's long budget: nothing to wait for here
    assert time.perf_counter() - t0 < 1.0


def test_a_process_leaving_before_ready_hands_over_at_interpreter_shutdown_too(tmp_path):
    """Python >= 3.12 starts no thread once the interpreter shuts down (our exit hook runs there): the local hand-over
    (spans spooled, metrics recorded) then runs on the exiting thread, the export goes with the SDK's own shutdown,
    and nothing is raised (it was an internal error, the hand-over skipped: found on vLLM 0.26's EngineCore)."""
    import subprocess
    import sys

    code = """
import atexit
from types import SimpleNamespace
from vllm_otel_startup.agent.export import ready
rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: print("exported")),
                     info=SimpleNamespace(kind="engine_core"))
def at_exit():
    ready.flush(rt, 0.025, before=lambda: print("handed over"), handover_s=1.0)
    print("exit hook done")
atexit.register(at_exit)
"""
    import vllm_otel_startup

    src = str(Path(vllm_otel_startup.__file__).parents[1])  # the package under test first, not another copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "handed over" in out.stdout and "exit hook done" in out.stdout


def _refused(message: str):
    def start(self: threading.Thread) -> None:
        raise RuntimeError(message)

    return start


def test_at_interpreter_shutdown_the_hand_over_runs_on_the_calling_thread_and_nothing_waits(monkeypatch):
    """The same on any Python: Thread.start refused as 3.12 refuses it at shutdown."""
    monkeypatch.setattr(threading.Thread, "start", _refused("can't create new thread at interpreter shutdown"))
    handed, exported = [], []
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: exported.append(1)),
                         info=SimpleNamespace(kind="worker"))
    t0 = time.perf_counter()
    ready.flush(rt, 5.0, before=lambda: handed.append(1), handover_s=5.0)
    assert handed == [1] and exported == []  # the export goes with the SDK's own shutdown
    assert time.perf_counter() - t0 < 1.0

    printed = []
    monkeypatch.setattr(ready, "print_summary", lambda rt: printed.append(rt))
    ready.print_summary_later(rt)
    assert printed == [rt]  # a start that exits still prints its breakdown, on the exiting thread


def test_a_thread_refused_for_any_other_reason_is_raised_as_before(monkeypatch):
    """A process at its thread limit: the caller's guard reports it (one warning); nothing runs in its place."""
    import pytest

    monkeypatch.setattr(threading.Thread, "start", _refused("can't start new thread"))
    handed = []
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: None),
                         info=SimpleNamespace(kind="worker"))
    with pytest.raises(RuntimeError, match="can't start new thread"):
        ready.flush(rt, 0.025, before=lambda: handed.append(1))
    assert handed == []
