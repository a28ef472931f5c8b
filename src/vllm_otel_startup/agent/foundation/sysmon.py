"""The process's one ``sys.monitoring`` tool (Python >= 3.12): what of ours watches a function through its code
object's events rather than a wrapper, so that no frame of ours sits under the call (patching/frameless.py: the
patch points; retro_spans.py: the import watcher). ``OTEL_PYTHON_VLLM_STARTUP_OFF=frameless``, an older interpreter or
no free tool id: each falls back to its wrapper.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import types
import weakref
from typing import Any

from vllm_otel_startup import diagnostics
from vllm_otel_startup.agent.foundation.guard import HOOKS, failed

_log = logging.getLogger("vllm_otel_startup")

TOOL_IDS = (4, 3)  # the ids sys.monitoring leaves unassigned (0 debugger, 1 coverage, 2 profiler, 5 optimizer)
TOOL_NAME = "vllm-otel-startup"


def available() -> bool:
    return hasattr(sys, "monitoring") and not diagnostics.off("frameless")


def import_code() -> types.CodeType:
    """What the import watchers watch: importlib's ``_find_and_load_unlocked``, which runs only for a module not loaded
    yet, and returns it whole (never a circular import's partial module). ``_find_and_load`` runs for every
    ``import_module`` call as well (many more calls than modules loaded in a vLLM process), each a callback of ours
    one frame deeper than its caller, where a frame can land on a data-stack chunk boundary: a chunk mapped and unmapped
    per call (cpython#142183; vLLM's CUDA-graph capture calls ``import_module`` a few times per graph). An
    interpreter without it: ``_find_and_load``."""
    import importlib._bootstrap as bootstrap

    return getattr(bootstrap, "_find_and_load_unlocked", bootstrap._find_and_load).__code__


class Events:
    """The process's one ``sys.monitoring`` tool id and its callbacks: each watched code object's events go to the
    handler that asked for them (a :class:`Monitor`'s rows, the import watcher of retro_spans.py). A handler has
    ``started(code, frame)``, ``returned(code, result)`` and ``unwound(code, exc)``; PY_UNWIND is on while one asks
    for it (:meth:`unwinding`). Callbacks never raise."""

    def __init__(self) -> None:
        self.tool: int | None = None
        # id(code) -> (code, handlers): a code object hashes by its whole content (tens of us for a module's), an id
        # does not; the code kept in the value keeps its id from being reused. importlib's import_code() has two
        # (the import watcher of retro_spans.py, the post-import hooks of patching/post_import.py)
        self._handlers: dict[int, tuple[types.CodeType, tuple[Any, ...]]] = {}
        # the last code an event came for and its handlers, compared by identity: ``id()`` raises an audit event, and
        # vLLM's processes have a Python audit hook (filelock's, imported with torch._inductor) that runs for each:
        # importlib's import_code(), nearly every event here, never reaches the dict (thousands of calls a process)
        # (a watch or unwatch in another thread while an event looks a code up: the generation tells the cache stale)
        self._last: tuple[Any, tuple[Any, ...], int] = (None, (), 0)
        self._generation = 0
        self._unwinding = 0
        self._lock = threading.Lock()
        # what the interpreter called us for (self_cost.py): PY_UNWIND callbacks, and PY_UNWIND switched on or off
        # (each switch makes every code object the process runs next check its instrumentation again)
        self.unwinds = 0
        self.switches = 0

    def watch(self, code: types.CodeType, handler: Any) -> bool:
        """PY_START and PY_RETURN of ``code`` to ``handler``, beside the handlers of other kinds (classes) and in
        place of one of its own kind (a later import watcher replaces an earlier one); False: no free tool id here."""
        if not self._tool():
            return False
        with self._lock:
            _, handlers = self._handlers.get(id(code), (code, ()))
            others = tuple(h for h in handlers if type(h) is not type(handler))
            self._handlers[id(code)] = (code, (*others, handler))  # a new tuple: callbacks read it unlocked
            self._generation += 1
        if not handlers:
            events = sys.monitoring.events
            sys.monitoring.set_local_events(self.tool, code, events.PY_START | events.PY_RETURN)
        return True

    def unwatch(self, code: types.CodeType, handler: Any = None) -> None:
        """Stop ``handler``'s events of ``code`` (None: every handler's); the code's events end with its last."""
        with self._lock:
            entry = self._handlers.get(id(code))
            left = () if entry is None or handler is None else tuple(h for h in entry[1] if h is not handler)
            if left:
                self._handlers[id(code)] = (code, left)
            else:
                self._handlers.pop(id(code), None)
            self._generation += 1
        if entry is not None and not left and self.tool is not None:
            sys.monitoring.set_local_events(self.tool, code, 0)
        if not self._handlers and self.tool is not None:  # the tool id is given back
            mon = sys.monitoring
            mon.set_events(self.tool, 0)
            for event in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND):
                mon.register_callback(self.tool, event, None)
            mon.free_tool_id(self.tool)
            self.tool, self._unwinding = None, 0

    def unwinding(self, delta: int) -> None:
        """A handler's calls in progress that need PY_UNWIND (+1 as one begins, -1 as it ends): on while any does."""
        with self._lock:
            before, self._unwinding = self._unwinding, max(0, self._unwinding + delta)
            if self.tool is not None and (before == 0) != (self._unwinding == 0):
                self.switches += 1
                sys.monitoring.set_events(self.tool, sys.monitoring.events.PY_UNWIND if self._unwinding else 0)

    def forked(self) -> None:
        """A forked child: its calls in flight are the parent's (it never returns through them as ours), its locks
        may have been held by a thread it does not have. PY_UNWIND goes off."""
        self._lock = threading.Lock()
        self._unwinding = 0
        if self.tool is not None:
            sys.monitoring.set_events(self.tool, 0)

    def _tool(self) -> bool:
        with self._lock:
            if self.tool is not None:
                return True
            mon = sys.monitoring
            for tool in TOOL_IDS:
                if mon.get_tool(tool) is not None:
                    continue
                try:
                    mon.use_tool_id(tool, TOOL_NAME)
                except ValueError:  # taken meanwhile by another tool
                    continue
                self.tool = tool
                mon.register_callback(tool, mon.events.PY_START, self._start)
                mon.register_callback(tool, mon.events.PY_RETURN, self._return)
                mon.register_callback(tool, mon.events.PY_UNWIND, self._unwind)
                return True
            _log.info("vllm-otel-startup: no free sys.monitoring tool id; patch points are wrapped")
            return False

    def _lookup(self, code: types.CodeType) -> tuple[Any, ...]:
        """``code``'s handlers (none: not watched)."""
        last, generation = self._last, self._generation
        if last[0] is code and last[2] == generation:
            return last[1]
        entry = self._handlers.get(id(code))
        if entry is None or entry[0] is not code:
            return ()
        self._last = (code, entry[1], generation)  # one tuple, written whole: atomic under the GIL
        return entry[1]

    # run by the interpreter in the caller's thread, at the call's start and end
    def _start(self, code: types.CodeType, offset: int) -> Any:
        handlers = self._lookup(code)
        if handlers:
            frame = sys._getframe(1)
            for handler in handlers:
                try:
                    handler.started(code, frame)
                except Exception:  # noqa: BLE001 - ours never raises into vLLM
                    failed(HOOKS, "sys.monitoring PY_START")
        return None

    def _return(self, code: types.CodeType, offset: int, result: Any) -> Any:
        handlers = self._lookup(code)
        if handlers:
            frame = sys._getframe(1)
            for handler in handlers:
                try:
                    handler.returned(code, frame, result)
                except Exception:  # noqa: BLE001
                    failed(HOOKS, "sys.monitoring PY_RETURN")
        return None

    def _unwind(self, code: types.CodeType, offset: int, exc: BaseException) -> Any:
        # every function's unwinding comes here while on: the rest return at once
        self.unwinds += 1
        for handler in self._lookup(code):
            try:
                handler.unwound(code, exc)
            except Exception:  # noqa: BLE001
                failed(HOOKS, "sys.monitoring PY_UNWIND")
        return None


_EVENTS: Events | None = None


def events() -> Events:
    """This process's :class:`Events` (one tool id for all of ours)."""
    global _EVENTS  # noqa: PLW0603 - one per process, made on first use
    if _EVENTS is None:
        _EVENTS = Events()
    return _EVENTS


def current() -> Events | None:
    """This process's :class:`Events` if it made one (nothing made here)."""
    return _EVENTS


_FORK_HOOKS: list[Any] = []  # what else resets itself in a forked child, weakly (reset_in_forked_child)


def reset_in_forked_child(obj: Any) -> None:
    """``obj.forked()`` runs in a forked child, before our events go on there (``obj`` held weakly): a frameless
    Monitor, the post-import hooks."""
    _FORK_HOOKS.append(weakref.ref(obj))


def _after_fork_in_child() -> None:
    for hook in [*_FORK_HOOKS]:
        obj = hook()
        if obj is not None:
            obj.forked()
    if _EVENTS is not None:
        _EVENTS.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
