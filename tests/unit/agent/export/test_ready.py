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
    assert ready.summary_due(rt)
    ready.flush(rt, 5.0, before=lambda: handed.append(2), then=ready.print_pending)
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


def test_at_a_ready_point_the_wait_is_for_the_local_hand_over_and_the_export_comes_a_delay_later():
    """Right after its ready point a process's main thread serves its first requests: an export or a rendering of
    ours beside it makes it wait for the GIL, so they begin READY_EXPORT_DELAY_MS later."""
    exported, handed = [], []
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: exported.append(time.monotonic())),
                         info=SimpleNamespace(kind="worker"))
    t0 = time.monotonic()
    ready.flush(rt, 5.0, before=lambda: handed.append(time.monotonic()), delay_s=0.3)
    back = time.monotonic()
    assert handed and back - t0 < 0.25 and exported == []  # back once handed over, not after the export
    deadline = time.monotonic() + 5
    while not exported and time.monotonic() < deadline:
        time.sleep(0.02)
    assert exported and exported[0] - handed[0] >= 0.29


def test_no_delay_by_default_nor_for_a_start_that_fails_or_a_forked_child(monkeypatch):
    spawned = SimpleNamespace(create_source="proc")
    monkeypatch.delenv("OTEL_PYTHON_VLLM_STARTUP_READY_EXPORT_DELAY_MS", raising=False)
    # off by default: an EngineCore its API server stops within the delay exported at its exit, and lost that race
    assert ready.export_delay(spawned, failing=False) == 0.0
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_READY_EXPORT_DELAY_MS", "1000")
    assert ready.export_delay(spawned, failing=False) == 1.0
    assert ready.export_delay(spawned, failing=True) == 0.0  # the process is leaving
    # multiprocessing ends a forked child with os._exit: no exit hook would export what still waits
    assert ready.export_delay(SimpleNamespace(create_source="fork"), failing=False) == 0.0


def test_a_breakdown_still_waiting_at_exit_is_printed_there_once(monkeypatch):
    printed: list[object] = []
    monkeypatch.setattr(ready, "print_summary", printed.append)
    monkeypatch.setattr(ready, "_EXITING", threading.Event())
    exported: list[int] = []
    rt = SimpleNamespace(provider=SimpleNamespace(force_flush=lambda timeout: exported.append(1)),
                         info=SimpleNamespace(kind="api_server"))
    assert ready.summary_due(rt)
    ready.flush(rt, 0.025, delay_s=30.0, then=ready.print_pending)
    assert printed == []
    ready._at_exit()  # noqa: SLF001 - the process exits before the delay is over
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(t.name == "vllm-otel-startup-flush" for t in threading.enumerate()):
        time.sleep(0.05)  # the waiting flush thread wakes too: it must neither print it again nor export
    assert printed == [rt] and exported == []  # the export is the SDK's shutdown's, right after the exit hooks


def test_a_child_forked_while_a_breakdown_waits_never_prints_its_parents(monkeypatch):
    printed: list[object] = []
    monkeypatch.setattr(ready, "print_summary", printed.append)
    monkeypatch.setattr(ready, "_EXITING", threading.Event())
    assert ready.summary_due(object())
    pid = os.fork()
    if pid == 0:
        ready._at_exit()  # noqa: SLF001 - the child's exit
        os._exit(0 if printed == [] else 1)
    assert os.waitpid(pid, 0)[1] == 0
    ready._at_exit()  # noqa: SLF001 - the parent still prints its own, once
    assert len(printed) == 1


def test_the_breakdown_is_printed_on_the_flush_thread_after_publish_and_before_the_export(monkeypatch):
    """At the root's ready point publish reads the children's spool once; the breakdown is rendered from what it read
    (no second read and parse) on the flush thread, no thread of its own, and before the export (a collector that
    does not answer never holds it up)."""
    from vllm_otel_startup.agent.export import spool
    from vllm_otel_startup.model import summary

    order: list[tuple[str, str]] = []
    whole = [object()]
    rt = SimpleNamespace(whole=None, info=SimpleNamespace(kind="api_server"),
                         provider=SimpleNamespace(force_flush=lambda timeout: order.append(
                             ("export", threading.current_thread().name))))

    def publish() -> None:
        order.append(("publish", threading.current_thread().name))
        rt.whole = whole

    monkeypatch.setattr(spool, "read", lambda *a, **k: order.append(("spool read", "")) or [])
    monkeypatch.setattr(summary, "render", lambda spans: order.append(("render", threading.current_thread().name))
                        or f"{len(spans)} spans")
    said: list[str] = []
    monkeypatch.setattr(ready.threads, "say", lambda text, *a: said.append(text))
    started: list[str] = []
    real_start = ready.threads.start
    monkeypatch.setattr(ready.threads, "start", lambda t: started.append(t.name) or real_start(t))
    assert ready.summary_due(rt)
    ready.flush(rt, 5.0, before=publish, then=ready.print_pending)
    flush = "vllm-otel-startup-flush"
    assert started == [flush]
    assert order[:3] == [("publish", flush), ("render", flush), ("export", flush)] and said == ["1 spans"]


def test_a_switched_off_printout_is_never_due(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SUMMARY", "0")
    assert not ready.summary_due(SimpleNamespace()) and ready._UNPRINTED == []  # noqa: SLF001
