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
    rt = object()
    ready.print_summary_later(rt, delay_s=30.0)
    assert printed == []
    ready._at_exit()  # noqa: SLF001 - the process exits before the delay is over
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and threading.active_count() > 1 and printed == [rt]:
        time.sleep(0.05)  # the waiting thread wakes too: it must not print it again
        if not any(t.name == "vllm-otel-startup-summary" for t in threading.enumerate()):
            break
    assert printed == [rt]


def test_a_child_forked_while_a_breakdown_waits_never_prints_its_parents(monkeypatch):
    printed: list[object] = []
    monkeypatch.setattr(ready, "print_summary", printed.append)
    monkeypatch.setattr(ready, "_EXITING", threading.Event())
    ready.print_summary_later(object(), delay_s=30.0)
    pid = os.fork()
    if pid == 0:
        ready._at_exit()  # noqa: SLF001 - the child's exit
        os._exit(0 if printed == [] else 1)
    assert os.waitpid(pid, 0)[1] == 0
    ready._at_exit()  # noqa: SLF001 - the parent still prints its own, once
    assert len(printed) == 1


def test_the_printout_starts_its_thread_after_publish_from_the_flush_thread_and_reuses_its_spans(monkeypatch):
    """At the root's ready point publish reads the children's spool once; the breakdown is rendered from what it read
    (no second read and parse), on a thread the flush thread starts, not vLLM's."""
    from vllm_otel_startup.agent.export import spool
    from vllm_otel_startup.model import summary

    rt = SimpleNamespace(whole=None)
    order: list[str] = []
    whole = [object()]

    def publish(host) -> None:
        order.append("publish")
        host.whole = whole

    rendered: list[object] = []
    monkeypatch.setattr(ready, "publish", publish)
    monkeypatch.setattr(spool, "read", lambda *a, **k: order.append("spool read") or [])
    monkeypatch.setattr(summary, "render", lambda spans: rendered.append(spans) or "breakdown")
    monkeypatch.setattr(ready.threads, "say", lambda *a, **k: None)
    starters: list[str] = []
    real_start = ready.threads.start
    monkeypatch.setattr(ready.threads, "start", lambda t: starters.append(threading.current_thread().name)
                        or real_start(t))
    flusher = threading.Thread(target=ready.publish_then_print, args=(rt, True, 0.0), name="flush")
    flusher.start()
    flusher.join(5)
    deadline = time.monotonic() + 5
    while not rendered and time.monotonic() < deadline:
        time.sleep(0.01)
    assert order == ["publish"] and rendered == [whole] and starters == ["flush"]


def test_a_switched_off_printout_starts_no_thread(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SUMMARY", "0")
    started: list[object] = []
    monkeypatch.setattr(ready.threads, "start", started.append)
    ready.print_summary_later(SimpleNamespace(), 0.0)
    assert started == [] and ready._UNPRINTED == []  # noqa: SLF001
