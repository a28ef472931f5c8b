"""One small wrapper builder per hook kind of the patch table (patch_points.HOOKS).

A builder only says which steps its kind takes before and after vLLM's call (:class:`Steps`); one runner per
calling convention (:func:`_sync`, :func:`_async`) makes every wrapper the same way: vLLM's function is called
exactly once, outside any guard, with the arguments it was given, and its result is returned (or its exception
re-raised, the very same object); each step of ours runs on its own through ``guard.safe``, so a step that fails
loses only its own work (reported once per process) and can never replace vLLM's result or exception. The
only step that may hand back something else is ``wrap`` (ctx: a context manager that delegates to vLLM's), and
where it fails vLLM's own result is returned.

A span-family hook (span, spawn, ready, guard) opens a span around the call unless vLLM traces the call itself,
then applies its kind's effect (spawn: the child's environment; ready: this process's start ends; guard: an
escaping exception fails it).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.calls import Call as ProbeCall
from vllm_otel_startup.agent.foundation.guard import HOOKS, safe
from vllm_otel_startup.agent.foundation.patch_points import PatchPoint
from vllm_otel_startup.agent.foundation.process import (
    API_SERVER,
    EMBEDDED,
    ENV_KIND,
    ENV_LABELS,
    ENV_PARENT,
    ENV_RANK,
    SPAWN_ENV,
    WORKER,
)
from vllm_otel_startup.agent.patching.host import CallProbes, PatchHost

Wrapper = Callable[[Any, Any, tuple, dict], Any]  # wrapt's (wrapped, instance, args, kwargs)


@dataclass(frozen=True)
class Hook:
    """What a builder needs to make one patch point's wrapper."""

    rt: PatchHost
    tracer: trace.Tracer
    probes: CallProbes
    point: PatchPoint
    emit_span: bool  # False where vLLM traces the call itself (its span is adopted)
    is_async: bool
    restore: Callable[[], None] | None = None  # puts the original back ("once")

    @property
    def live(self) -> bool:
        return self.rt.active and not self.rt.done


class Call:
    """One patched call as its steps share it."""

    __slots__ = ("args", "instance", "kwargs", "on", "parent", "saved", "span", "state", "token")

    def __init__(self, instance: Any, args: tuple, kwargs: dict) -> None:
        self.instance, self.args, self.kwargs = instance, args, kwargs
        self.on = False  # this process was still starting when the call began (Hook.live)
        self.span: Any = None  # our span for this call, and the context token that made it current
        self.token: Any = None
        self.parent: Any = None  # the context current before our span (spawn)
        self.saved: dict[str, str | None] | None = None  # the environment before the spawn
        self.state: Any = None  # the kind's own


Before = Callable[[Hook, Call], None]
After = Callable[[Hook, Call, Any, "BaseException | None"], None]  # (hook, call, result, exception)


@dataclass(frozen=True)
class Steps:
    """A hook kind's work: ``before`` vLLM's call, ``after`` it (returned or raised), each step guarded on its
    own; ``wrap`` may return a stand-in for a returned result (ctx)."""

    before: tuple[Before, ...] = ()
    after: tuple[After, ...] = ()
    wrap: Callable[[Hook, Call, Any], Any] | None = None


def build(hook: Hook) -> Wrapper:
    steps = BUILDERS[hook.point.hook](hook)
    return _async(hook, steps) if hook.is_async else _sync(hook, steps)


def run_before(h: Hook, steps: Steps, c: Call) -> None:
    """Our steps before vLLM's call, each guarded on its own (the wrappers here; frameless.py's callbacks)."""
    for step in steps.before:
        safe(HOOKS, step, h, c)


def run_after(h: Hook, steps: Steps, c: Call, result: Any, exc: BaseException | None) -> Any:
    """Our steps after vLLM's call; what its caller gets (the result, or the ``wrap`` step's stand-in)."""
    for step in steps.after:
        safe(HOOKS, step, h, c, result, exc)
    if exc is not None or steps.wrap is None:
        return result
    return safe(HOOKS, steps.wrap, h, c, result, default=result)


def _sync(h: Hook, steps: Steps) -> Wrapper:
    def wrapper(wrapped, instance, args, kwargs):
        c = Call(instance, args, kwargs)
        run_before(h, steps, c)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            run_after(h, steps, c, None, exc)
            raise
        return run_after(h, steps, c, result, None)
    return wrapper


def _async(h: Hook, steps: Steps) -> Wrapper:
    """vLLM's coroutine is made at the call, as unpatched; our steps run around its await."""
    async def run(coro, instance, args, kwargs):
        c = Call(instance, args, kwargs)
        run_before(h, steps, c)
        try:
            result = await coro
        except BaseException as exc:
            run_after(h, steps, c, None, exc)
            raise
        return run_after(h, steps, c, result, None)

    def wrapper(wrapped, instance, args, kwargs):
        return run(wrapped(*args, **kwargs), instance, args, kwargs)
    return wrapper


# ---- steps shared by the kinds ------------------------------------------------------------------------------
def _live(h: Hook, c: Call) -> None:
    c.on = h.live


def _open_span(h: Hook, c: Call) -> None:
    """Our span for this call, current while it runs (not where vLLM traces the call itself)."""
    if c.on and h.emit_span:
        c.span = h.tracer.start_span(h.point.span)
        c.token = otel_context.attach(trace.set_span_in_context(c.span))


def _detach(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    token, c.token = c.token, None
    if token is not None:
        otel_context.detach(token)


def _mark_error(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    """As OpenTelemetry's own ``start_as_current_span`` does: an ``Exception`` leaving the call is recorded and
    sets the ERROR status (not a BaseException such as GeneratorExit or SystemExit)."""
    if c.span is not None and isinstance(exc, Exception) and c.span.is_recording():
        c.span.record_exception(exc)
        c.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def _end_span(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    span, c.span = c.span, None
    if span is not None:
        span.end()


CLOSE_SPAN: tuple[After, ...] = (_detach, _mark_error, _end_span)


def _probe(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    """The row's cause probe on a call that returned: on our span, or (no span: enrich) pending for the phase."""
    if c.on and exc is None and (c.span is not None or not h.point.span):
        h.probes.after_call(h.point.probe, c.span, ProbeCall(c.instance, c.args, c.kwargs, result))


def _last_error(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    if exc is not None:
        h.rt.last_error = exc


# ---- hooks without a span of their own --------------------------------------------------------------------
def _once(h: Hook) -> Steps:
    """The first call that succeeds, as a span made after it returned (a failing call, e.g. CUDA init probed
    by a CPU build, is not an error of the start: no span, and the next call is watched)."""
    busy, fired = threading.Lock(), [False]

    def begin(h: Hook, c: Call) -> None:
        # nested calls (torch re-enters _lazy_init while initialising) and other threads pass through
        t0 = time.time_ns()
        if not fired[0] and h.live and busy.acquire(blocking=False):
            c.state = [t0, None]

    def stamp(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
        if c.state is not None:
            c.state[1] = time.time_ns()

    def release(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
        if c.state is not None:
            busy.release()

    def record(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
        if c.state is None or exc is not None:
            return
        fired[0] = True
        if h.restore is not None:
            h.restore()
        t0, t1 = c.state
        h.tracer.start_span(h.point.span, start_time=t0).end(end_time=t1)
    return Steps(before=(begin,), after=(stamp, release, record))


def _marker(h: Hook) -> Steps:
    """Ends the open bootstrap segment and starts the row's ``segment`` (or none)."""
    def close_segment(h: Hook, c: Call) -> None:
        if h.live:
            h.rt.close_segment(time.time_ns(), h.point.segment)
    return Steps(before=(close_segment,))


def _since(h: Hook) -> Steps:
    """vLLM's inline work since the row's ``since`` span ended in this process, as a span made when the call
    comes (a child of what is current there, never starting before it); none where that span never ended here."""
    def record(h: Hook, c: Call) -> None:
        if not h.live:
            return
        now = time.time_ns()
        ends = [end for _, end, name, *_ in list(h.rt.local) if name == h.point.since and end <= now]
        if ends:
            parent_start = getattr(trace.get_current_span(), "start_time", None) or 0
            h.tracer.start_span(h.point.span, start_time=max(*ends, parent_start)).end(end_time=now)
    return Steps(before=(record,))


def _enrich(h: Hook) -> Steps:
    """The row's probe records attributes for its phase's span."""
    return Steps(before=(_live,), after=(_probe,))


def _ctx(h: Hook) -> Steps:
    """A span around the context manager the call returns (enter to exit)."""
    def wrap(h: Hook, c: Call, cm: Any) -> Any:
        if not c.on:
            return cm
        # vLLM opens the same monitor inside its AOT-artifact load (_try_load_aot_compiled_fn, our "AOT cache
        # load" span): that is a cache lookup whose failure only means "compile again", so it gets no
        # torch.compile span (and no ERROR); its outcome goes on the load span.
        current = trace.get_current_span()
        if getattr(current, "name", None) == sc.AOT_LOAD_SPAN and current.is_recording():
            return SpanContextManager(h, cm, aot_span=current)
        return SpanContextManager(h, cm)
    return Steps(before=(_live,), wrap=wrap)


# ---- span, spawn, ready, guard: a span around the call, then the kind's effect ---------------------------
def _around(h: Hook, effect: After | None = None) -> Steps:
    """A span around the call; ``effect`` after it ended."""
    effects = (effect,) if effect is not None else ()
    return Steps(before=(_live, _open_span), after=(_last_error, _probe, *CLOSE_SPAN, *effects))


def _spawn(h: Hook) -> Steps:
    """Around Process.start(): the child's OTEL_PYTHON_VLLM_STARTUP_* variables (trace parent, kind, rank,
    fleet labels) are set for the spawn (the child hangs beside the spawn span, under what was current before
    it) and restored after it, whatever it did."""
    def parent(h: Hook, c: Call) -> None:
        c.parent = otel_context.get_current()

    def announce(h: Hook, c: Call) -> None:
        if c.on:
            c.saved = {k: os.environ.get(k) for k in SPAWN_ENV}
            _announce_child(h, c.parent, c.args, c.kwargs)
    def frontends(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
        # API servers spawned: this process (the launcher) is ready when they all are
        if c.on and exc is None and h.point.child == API_SERVER:
            h.rt.await_frontends(len(getattr(c.instance, "processes", None) or ()))
    return Steps(before=(_live, parent, _open_span, announce),
                 after=(_restore_env, _last_error, _probe, *CLOSE_SPAN, frontends))


def _restore_env(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    saved, c.saved = c.saved, None
    for k, v in (saved or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _announce_child(h: Hook, parent_ctx: Any, args: tuple, kwargs: dict) -> None:
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier, context=parent_ctx)
    if "traceparent" in carrier:
        child = h.point.child
        os.environ[ENV_PARENT] = carrier["traceparent"]
        os.environ[ENV_KIND] = child or ""
        os.environ[ENV_LABELS] = json.dumps(h.rt.fleet())
        rank = kwargs.get("rank", args[2] if child == WORKER and len(args) > 2 else None)
        if isinstance(rank, int):
            os.environ[ENV_RANK] = str(rank)
        else:
            os.environ.pop(ENV_RANK, None)


def _guard_effect(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    guard(h.rt, exc)


def _ready_effect(h: Hook, c: Call, result: Any, exc: BaseException | None) -> None:
    ready(h.rt, h.point, exc)


def _ready(h: Hook) -> Steps:
    """A span around the call, whose return ends this process's start; in a program of the user's whose engine's
    start is over, a new engine's construction begins a start of its own first."""
    steps = _around(h, _ready_effect)
    return Steps(before=(_next_start, *steps.before), after=steps.after)


def _next_start(h: Hook, c: Call) -> None:
    rt = h.rt
    if h.point.ends == EMBEDDED and rt.info.embedded and rt.active and rt.done and rt.process_span is not None:
        rt.next_start()


def guard(rt: PatchHost, exc: BaseException | None) -> None:
    """An exception escaping a guard row's call fails this process's startup."""
    if exc is not None and rt.active:
        rt.finish(error=exc)


def ends_here(rt: PatchHost, point: PatchPoint) -> bool:
    """Does the return of this ready row's call end this process's startup?"""
    return point.ends == rt.info.kind or (point.ends == EMBEDDED and rt.info.embedded)


def ready(rt: PatchHost, point: PatchPoint, exc: BaseException | None) -> None:
    """The return (or failure) of a ready row's call ends this process's startup, if it is the process the row ends."""
    if rt.active and ends_here(rt, point):
        rt.finish(error=exc)


def at_native_end(rt: PatchHost, point: PatchPoint) -> Callable[[BaseException | None], None] | None:
    """A ready or guard row's effect where vLLM traces the call itself, run as vLLM's span ends, with the exception it
    recorded (export/processor.py): no wrapper, so no frame of ours under vLLM's call. None: the row has nothing to do
    in this process (a worker's ready row in an EngineCore that runs its worker in-process)."""
    if point.hook == "ready" and not ends_here(rt, point):
        return None

    def effect(exc: BaseException | None) -> None:
        if exc is not None:
            rt.last_error = exc
        if point.hook == "ready":
            ready(rt, point, exc)
        else:
            guard(rt, exc)
    return effect


BUILDERS: dict[str, Callable[[Hook], Steps]] = {
    "span": _around,
    "spawn": _spawn,
    "ready": _ready,
    "guard": lambda h: _around(h, _guard_effect),
    "marker": _marker,
    "ctx": _ctx,
    "enrich": _enrich,
    "once": _once,
    "since": _since,
}


class SpanContextManager:
    """Wraps vLLM's context manager so that our span covers its enter-to-exit, or (``aot_span``) so that an
    exception leaving it is recorded as the outcome of an enclosing AOT-artifact load. vLLM's ``__enter__`` and
    ``__exit__`` are called exactly once, unguarded, and what they return or raise is what the ``with`` gets;
    our steps run guarded around them."""

    def __init__(self, h: Hook, cm: Any, aot_span: Any = None) -> None:
        self._h, self._cm, self._aot_span = h, cm, aot_span
        self._call = Call(None, (), {})

    def __enter__(self):
        c = self._call
        c.on = self._aot_span is None
        safe(HOOKS, _open_span, self._h, c)
        try:
            return self._cm.__enter__()
        except BaseException as exc:
            self._close(exc)
            raise

    def __exit__(self, exc_type, exc, tb):
        if self._aot_span is not None and exc is not None:
            safe(HOOKS, _aot_failed, self._aot_span, exc)
        try:
            suppress = self._cm.__exit__(exc_type, exc, tb)
        except BaseException as err:
            self._close(err)
            raise
        self._close(None if suppress else exc)
        return suppress

    def _close(self, exc: BaseException | None) -> None:
        for step in CLOSE_SPAN:
            safe(HOOKS, step, self._h, self._call, None, exc)


def _aot_failed(span: Any, exc: BaseException) -> None:
    span.set_attribute(sc.COMPILE_AOT_LOADED, False)
    span.set_attribute(sc.COMPILE_AOT_LOAD_ERROR, f"{type(exc).__name__}: {exc}"[:300])
