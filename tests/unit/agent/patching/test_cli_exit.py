"""The cli_main row: the end of vLLM's CLI is read where the interpreter reports it, with no frame of ours under the
CLI (patching/cli_exit.py). Each case is a real interpreter whose ``main`` fails, exits or returns, with the agent's
real exit hook (``vllm_otel_startup._at_exit``) registered as the agent registers it; the runtime is a stand-in that
prints how its start ended."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[4] / "src"
CHILD = """
import atexit, sys
import vllm_otel_startup as pkg
from vllm_otel_startup.agent.patching.cli_exit import CliExit

class Rt:
    active, done, last_error = True, False, None
    def finish(self, error=None, outcome=None):
        self.done = True
        outcome = outcome or ("failed" if error else "ready")  # as Runtime.finish reads it
        print("finished", type(error).__name__ if error else None, getattr(error, "code", None), outcome, flush=True)

rt = Rt()
atexit.register(pkg._at_exit, rt)  # as the agent registers it, before vLLM's CLI runs
CliExit(rt).install()

def main():
    ours = []
    f = sys._getframe()
    while f is not None:
        ours.append("vllm_otel_startup" in f.f_code.co_filename)
        f = f.f_back
    print("frames of ours under main:", sum(ours), flush=True)
    how = sys.argv[1]
    if how == "raise":
        raise RuntimeError("model failed to load")
    if how == "interrupt":
        raise KeyboardInterrupt("terminated")
    if how.startswith("exit"):
        sys.exit(int(how[4:]))
    if how.startswith("caught"):
        try:
            sys.exit(3)
        except SystemExit:
            pass
        if how == "caught_then_exit0":
            sys.exit(0)
        rt.finish(outcome="ready")  # the start went on to its ready point
    return None

sys.exit(main())
"""


def run(how: str) -> tuple[int, list[str], str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    p = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout.splitlines(), p.stderr


def test_nothing_of_ours_is_on_the_stack_while_the_cli_runs():
    code, out, err = run("return")
    assert out[0] == "frames of ours under main: 0", err


@pytest.mark.parametrize("how, code, ended", [
    ("raise", 1, "RuntimeError None failed"),  # an exception escaping the CLI: at once, before the exit hooks
    ("interrupt", -2, "KeyboardInterrupt None failed"),  # vLLM's SIGTERM handler in the API server raises this
    ("exit2", 2, "SystemExit 2 failed"),  # argparse's error, or vLLM's own sys.exit(1): failed at exit
    ("exit0", 0, "None None exited"),
    ("return", 0, "None None exited"),  # a CLI that ends before ready
])
def test_how_the_cli_ended_is_how_the_start_ended_and_the_process_exits_as_without_us(how, code, ended):
    rc, out, err = run(how)
    assert rc == code, err
    assert out[1:] == [f"finished {ended}"], (out, err)
    if how in ("raise", "interrupt"):  # the interpreter's own report, unchanged
        assert "Traceback (most recent call last)" in err and ended.split()[0] in err


def test_a_status_caught_before_ready_does_not_fail_a_start_that_became_ready_or_exited_with_0():
    rc, out, err = run("caught")
    assert (rc, out[1:]) == (0, ["finished None None ready"]), err
    rc, out, err = run("caught_then_exit0")  # the exit that ended the process said 0: exited, not failed
    assert (rc, out[1:]) == (0, ["finished None None exited"]), err


def test_uninstall_puts_back_what_was_there_and_a_later_hook_is_left_alone():
    from vllm_otel_startup.agent.patching.cli_exit import CliExit

    before_hook, before_exit = sys.excepthook, sys.exit
    try:
        cli = CliExit(object()).install()
        assert sys.excepthook == cli.excepthook and sys.exit == cli.exit
        cli.uninstall()
        assert (sys.excepthook, sys.exit) == (before_hook, before_exit)
        cli.install()  # never twice: a later hook chained to ours would be chained back to it
        assert (sys.excepthook, sys.exit) == (before_hook, before_exit)
        other = CliExit(object()).install()
        later = lambda *a: None  # noqa: E731 - someone else's hook, installed after ours
        sys.excepthook = later
        other.uninstall()
        assert sys.excepthook is later and sys.exit == before_exit
    finally:
        sys.excepthook, sys.exit = before_hook, before_exit


class _Rt:
    active, done = True, False

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.last_error, self.finished = fail, None, []

    def finish(self, error=None, outcome=None):
        if self.fail:
            raise OSError("planted")
        self.finished.append((error, outcome))


def _cli(rt, seen):
    from vllm_otel_startup.agent.patching.cli_exit import CliExit

    cli = CliExit(rt)
    cli._excepthook = lambda *a: seen.append(("printed", a[1]))  # noqa: SLF001 - the hook that was in place
    cli._exit = lambda status=None: seen.append(("exit", status))  # noqa: SLF001 - sys.exit, without leaving
    cli.installed, cli._pid = True, os.getpid()  # noqa: SLF001 - installed, without touching this interpreter's
    return cli


def test_the_interpreters_report_comes_first_and_a_failure_of_ours_never_hides_it():
    seen = []
    rt = _Rt()
    err = RuntimeError("vLLM's own")
    _cli(rt, seen).excepthook(RuntimeError, err, None)
    assert seen == [("printed", err)] and rt.finished == [(err, None)]
    seen.clear()
    _cli(_Rt(fail=True), seen).excepthook(RuntimeError, err, None)
    assert seen == [("printed", err)]


def test_a_phases_error_is_not_overwritten_by_a_status_and_only_the_main_thread_counts():
    import threading

    seen, rt = [], _Rt()
    cli = _cli(rt, seen)
    phase = ValueError("a phase failed")
    rt.last_error = phase
    cli.exit(3)  # called from this function, not a console script's last line: noted, a phase's error kept
    assert rt.last_error is phase and rt.finished == [] and seen == [("exit", 3)]
    rt.last_error = None
    t = threading.Thread(target=cli.exit, args=(4,))  # another thread's exit ends only that thread
    t.start()
    t.join()
    t = threading.Thread(target=cli.excepthook, args=(RuntimeError, RuntimeError("x"), None))
    t.start()
    t.join()
    assert rt.last_error is None and rt.finished == []


def test_the_rows_installation_wraps_nothing_and_hooks_the_interpreter_in_the_api_server(start):
    """The table's cli_main row, applied as vLLM's CLI module is imported (a fake vLLM tree, tests/unit/fake_vllm.py):
    ``main`` stays vLLM's own function; our hooks are in place, and uninstrument puts back what was there."""
    import importlib

    before_hook, before_exit = sys.excepthook, sys.exit
    s = start("api_server", "0.26.0")
    cli = importlib.import_module("vllm.entrypoints.cli.main")
    target = "vllm.entrypoints.cli.main:main"
    assert s.installer.status[target] == "applied"
    assert getattr(cli.main, "__wrapped__", None) is None and cli.main.__module__ == "vllm.entrypoints.cli.main"
    hooks = s.installer.cli_exit
    assert sys.excepthook == hooks.excepthook and sys.exit == hooks.exit
    s.installer.uninstall()
    assert (sys.excepthook, sys.exit) == (before_hook, before_exit)
