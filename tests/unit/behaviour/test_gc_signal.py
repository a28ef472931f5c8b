"""Our garbage-collection watcher never swallows a signal: vLLM's SIGTERM handler raises ``SystemExit`` once, and
Python ignores what a ``gc`` callback raises. A pending signal's handler runs at the main thread's next bytecode
boundary, which was often the entry of our callback: the worker then went on starting (4 of 6 runs of this test's
child before the fix). The exception handed back to the main thread could land at a callback's entry again, every
time in this loop (12 of 180 runs on a busy 2-core host before it waited for the main thread to be elsewhere, 0 of 180
after). Real signals, a real allocation-heavy loop, our real watcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
CHILD = """
import signal, sys, time
from opentelemetry import trace
from vllm_otel_startup.agent.resources.retro_spans import RetroSpans
RetroSpans(trace.get_tracer("t")).install()
fired = []
def handler(signum, frame):  # as vLLM's worker: raise SystemExit once
    if not fired:
        fired.append(1)
        raise SystemExit()
signal.signal(signal.SIGTERM, handler)
print("ready", flush=True)
t0 = time.monotonic()
try:
    while time.monotonic() - t0 < 5:
        x = [[i] for i in range(2000)]  # a collection every few hundred allocations
except SystemExit:
    print("exited", flush=True)
    raise
print("swallowed", flush=True)
"""


def run_once() -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    return p.returncode, out.strip(), err


def test_a_sigterm_handled_inside_our_gc_callback_still_ends_the_process():
    for _ in range(6):
        code, out, err = run_once()
        assert (code, out) == (0, "exited"), err  # SystemExit() exits 0, as vLLM's worker does
        assert "Exception ignored" not in err, err


def test_what_our_callback_does_not_own_still_reaches_the_previous_hook(monkeypatch):
    from opentelemetry import trace

    from vllm_otel_startup.agent.resources.retro_spans import RetroSpans

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    rs = RetroSpans(trace.get_tracer("t"))
    rs.install()
    try:
        class Unraisable:
            exc_type, exc_value, object = SystemExit, SystemExit(), print  # not our callback

        sys.unraisablehook(Unraisable)
        assert seen == [Unraisable]
    finally:
        rs.uninstall()
    assert sys.unraisablehook == seen.append  # ours is gone again


def test_at_interpreter_shutdown_nothing_is_handed_back_and_nothing_is_raised_into_the_hook(monkeypatch):
    from vllm_otel_startup.agent.resources import retro_spans

    def refused(self):  # what Python >= 3.12 raises once the interpreter shuts down
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refused)
    retro_spans.hand_back(SystemExit)  # returns: no thread, no exception set, nothing raised into the hook


def test_a_thread_limit_is_still_raised_from_the_hand_back(monkeypatch):
    from vllm_otel_startup.agent.resources import retro_spans

    def limit(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", limit)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        retro_spans.hand_back(SystemExit)
