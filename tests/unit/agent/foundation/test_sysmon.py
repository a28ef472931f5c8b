"""agent/sysmon.py: the process's one ``sys.monitoring`` tool (Python >= 3.12). Each watched code object's events
go to the handlers that asked for them, one per kind; a handler that raises never reaches the caller; the tool id is
given back with the last watch; PY_UNWIND is on only while a handler needs it; a forked child resets what holds
state. Where the interpreter has no ``sys.monitoring`` (or OFF=frameless) it is not available and the wrappers run.
(The patch points it serves: agent/patching/test_frameless.py; the unit tier runs on 3.12 too: tests/py312/.)"""

from __future__ import annotations

import gc
import importlib._bootstrap as bootstrap
import sys

import pytest

from vllm_otel_startup.agent.foundation import sysmon

monitoring = pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring: Python >= 3.12")


def test_available_only_with_sys_monitoring_and_not_left_out(monkeypatch):
    assert sysmon.available() is hasattr(sys, "monitoring")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "frameless")
    assert sysmon.available() is False


def test_the_import_watchers_watch_the_loader_of_a_module_not_loaded_yet():
    want = getattr(bootstrap, "_find_and_load_unlocked", bootstrap._find_and_load)  # noqa: SLF001
    assert sysmon.import_code() is want.__code__


def test_one_events_object_per_process_made_on_first_use(monkeypatch):
    monkeypatch.setattr(sysmon, "_EVENTS", None)
    assert sysmon.current() is None
    ev = sysmon.events()
    assert sysmon.events() is ev and sysmon.current() is ev


class _Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.seen: list[tuple] = []
        self.fail = fail

    def started(self, code, frame) -> None:
        self.seen.append(("start", code.co_name, frame.f_code is code))
        if self.fail:
            raise RuntimeError("planted")

    def returned(self, code, frame, result) -> None:
        self.seen.append(("return", code.co_name, result))

    def unwound(self, code, exc) -> None:
        self.seen.append(("unwind", code.co_name, type(exc).__name__))


class _Other(_Recorder):
    pass


def _watched(x):
    return x * 2


def _raises():
    raise KeyError("x")


@monitoring
def test_events_reach_each_kind_of_handler_and_a_failing_one_never_reaches_the_caller(monkeypatch):
    ev = sysmon.Events()
    one, other = _Recorder(fail=True), _Other()
    code = _watched.__code__
    try:
        assert ev.watch(code, one) and ev.watch(code, other) and ev.tool in sysmon.TOOL_IDS
        assert _watched(3) == 6  # the planted failure stayed ours
        assert one.seen == [("start", "_watched", True), ("return", "_watched", 6)]  # its failure lost only itself
        assert other.seen == [("start", "_watched", True), ("return", "_watched", 6)]
        replacement = _Recorder()
        ev.watch(code, replacement)  # one handler per kind: the later one replaces the earlier
        _watched(1)
        assert replacement.seen == [("start", "_watched", True), ("return", "_watched", 2)]
        assert len(one.seen) == 2
    finally:
        ev.unwatch(code)
    assert ev.tool is None  # the last watch gave the tool id back


@monitoring
def test_py_unwind_is_on_only_while_a_handler_needs_it():
    ev = sysmon.Events()
    rec, code = _Recorder(), _raises.__code__
    try:
        ev.watch(code, rec)
        ev.unwinding(+1)
        with pytest.raises(KeyError):
            _raises()
        ev.unwinding(-1)
        with pytest.raises(KeyError):
            _raises()
        assert [e[0] for e in rec.seen] == ["start", "unwind", "start"] and ev.switches == 2
        assert rec.seen[1] == ("unwind", "_raises", "KeyError") and ev.unwinds >= 1
    finally:
        ev.unwatch(code)


class _Resettable:
    def __init__(self) -> None:
        self.resets = 0

    def forked(self) -> None:
        self.resets += 1


def test_a_forked_child_resets_what_asked_for_it_and_forgets_what_is_gone(monkeypatch):
    monkeypatch.setattr(sysmon, "_FORK_HOOKS", [])
    monkeypatch.setattr(sysmon, "_EVENTS", None)
    kept, gone = _Resettable(), _Resettable()
    sysmon.reset_in_forked_child(kept)
    sysmon.reset_in_forked_child(gone)
    del gone
    gc.collect()
    sysmon._after_fork_in_child()  # noqa: SLF001 - what os.register_at_fork runs in the child
    assert kept.resets == 1
