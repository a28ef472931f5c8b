"""Patch points with no frame of ours under vLLM's call (Python >= 3.12, ``sys.monitoring``).

A wrapper is a Python frame between vLLM's caller and vLLM's function for as long as the call runs. That frame shifts
vLLM's whole stack, and a loop deep in a long call (CUDA-graph capture: thousands of calls) can then land on a
boundary of CPython's 16 KiB data-stack chunks, where each call maps and unmaps a chunk (system calls and a page
fault per call; cpython#142183, unfixed in 3.12 and 3.13). Here a row of kind span, ready, guard or enrich on a plain
function instead asks ``sys.monitoring`` for the PY_START and PY_RETURN events of that function's own code object, and
for PY_UNWIND (a process-wide event, on only while such a call runs). Its hook kind's steps (wrappers.Steps) run in
those callbacks, exactly as a wrapper runs them before and after the call, and return: while vLLM's function runs,
nothing of ours is on its stack. vLLM's function is not replaced (nothing to pickle, nothing to unwrap but the
events), and it is called as without the agent.

Only a function that is this row's own is monitored: its code's qualified name and module are the row's (the code of
a decorator's inner wrapper, which every function it decorates shares, never is; a decorated target is monitored
through ``__wrapped__``, its decorator's frame is vLLM's). A generator or coroutine function, an odd object, an
interpreter without ``sys.monitoring`` or with no free tool id, and ``OTEL_PYTHON_VLLM_STARTUP_OFF=frameless`` keep
the wrapper.
"""

from __future__ import annotations

import inspect
import threading
import types
from typing import Any

from vllm_otel_startup.agent.foundation import sysmon
from vllm_otel_startup.agent.foundation.sysmon import events
from vllm_otel_startup.agent.patching import post_import
from vllm_otel_startup.agent.patching.wrappers import BUILDERS, Call, Hook, Steps, run_after, run_before

KINDS = frozenset({"span", "ready", "guard", "enrich"})  # kinds whose steps are only "before" and "after" the call
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def own_function(raw: Any, qualname: str, depth: int = 4) -> types.FunctionType | None:
    """The plain function behind ``raw`` (a class ``__dict__`` entry or a module attribute) whose code is the row's
    own, looked for through ``__wrapped__`` (decorators), or None. Its module may be another than the row's: a
    function vLLM imports under its own name (``gpu_worker.warmup_kernels``) is the same code, and its calls from
    anywhere are the row's (a wrapper saw only those through the row's module)."""
    fn = raw
    for _ in range(depth):
        fn = getattr(fn, "__func__", fn)  # staticmethod / classmethod
        if isinstance(fn, types.FunctionType):
            code = fn.__code__
            if getattr(code, "co_qualname", None) == qualname and not code.co_flags & _NOT_PLAIN:
                return fn
        fn = getattr(fn, "__wrapped__", None)
        if fn is None:
            return None
    return None


class _Row:
    __slots__ = ("bound", "code", "hook", "steps")

    def __init__(self, code: types.CodeType, hook: Hook, steps: Steps, bound: bool) -> None:
        self.code, self.hook, self.steps, self.bound = code, hook, steps, bound


class _Open:
    __slots__ = ("call", "row")

    def __init__(self, row: _Row, call: Call) -> None:
        self.row, self.call = row, call


class Monitor:
    """An Installer's monitored rows: code object -> the row's steps; per thread, the calls now running."""

    def __init__(self) -> None:
        self._rows: dict[int, _Row] = {}  # id(code) -> row (the row keeps its code: the id is not reused)
        self._stacks: dict[int, list[_Open]] = {}
        self._running = 0  # calls running in all threads (PY_UNWIND is on while there is one)
        self._lock = threading.Lock()
        sysmon.reset_in_forked_child(self)

    def forked(self) -> None:
        """A forked child: the calls in flight are the parent's."""
        self._lock = threading.Lock()
        self._stacks.clear()
        self._running = 0

    @property
    def tool(self) -> int | None:
        return events().tool if self._rows else None

    def add(self, hook: Hook, raw: Any) -> bool:
        """Monitor ``hook.point``'s function instead of wrapping it; False: not possible here (wrap it)."""
        point = hook.point
        if point.hook not in KINDS or hook.is_async:
            return False
        fn = own_function(raw, point.qualname)
        if fn is None:
            return False
        code = fn.__code__
        if id(code) in self._rows:  # the same function under two rows: the first one's
            return True
        bound = not isinstance(raw, staticmethod) and "." in point.qualname and code.co_argcount > 0
        row = _Row(code, hook, BUILDERS[point.hook](hook), bound)
        if not events().watch(code, self):
            return False
        self._rows[id(code)] = row
        return True

    def remove_all(self) -> None:
        """Stop every event (uninstrument); calls running now end no span of ours."""
        ev = events()
        for row in list(self._rows.values()):
            ev.unwatch(row.code, self)
        with self._lock:
            running, self._running = self._running, 0
            self._rows.clear()
            self._stacks.clear()
        ev.unwinding(-running)

    # ---- the handler: at the call's start and end, in vLLM's thread --------------------------------------------
    def started(self, code: types.CodeType, frame: types.FrameType) -> None:
        row = self._rows.get(id(code))
        if row is None:
            return
        call = Call(None, (), {})
        if row.hook.point.probe:  # the probe reads the call's arguments, as the wrapper gave them
            call = _arguments(frame, code, row.bound)
        with self._lock:
            self._stacks.setdefault(threading.get_ident(), []).append(_Open(row, call))
            self._running += 1
        events().unwinding(+1)
        run_before(row.hook, row.steps, call)
        post_import.sweep()  # a module our steps imported (no events inside this callback) gets its hooks

    def returned(self, code: types.CodeType, frame: types.FrameType, result: Any) -> None:
        self._end(code, result, None)

    def unwound(self, code: types.CodeType, exc: BaseException) -> None:
        self._end(code, None, exc)

    def _end(self, code: types.CodeType, result: Any, exc: BaseException | None) -> None:
        with self._lock:
            stack = self._stacks.get(threading.get_ident())
            if not stack or all(o.row.code is not code for o in stack):
                return  # a call that began before the row was monitored
            ended = []
            while stack:  # LIFO; anything above the call is one that never reported its end (none expected)
                ended.append(stack.pop())
                if ended[-1].row.code is code:
                    break
            if not stack:
                del self._stacks[threading.get_ident()]
            self._running -= len(ended)
        events().unwinding(-len(ended))
        for o in ended:
            mine = o.row.code is code
            run_after(o.row.hook, o.row.steps, o.call, result if mine else None, exc if mine else None)
        post_import.sweep()


def _arguments(frame: types.FrameType, code: types.CodeType, bound: bool) -> Call:
    """The call's instance, positional and keyword arguments read from the frame at its start (before vLLM's code
    ran). Every named argument is also given by name: a probe reads an argument by name, then by position."""
    loc = frame.f_locals
    names = code.co_varnames
    n, k = code.co_argcount, code.co_kwonlyargcount
    positional = [loc.get(name) for name in names[:n]]
    instance = positional.pop(0) if bound and positional else None
    kwargs = {name: loc[name] for name in names[1 if bound else 0:n + k] if name in loc}
    i = n + k
    extra: tuple = ()
    if code.co_flags & inspect.CO_VARARGS:
        extra = tuple(loc.get(names[i], ()))
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(loc.get(names[i], {}))
    return Call(instance, (*positional, *extra), kwargs)
