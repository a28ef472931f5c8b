"""One small wrapper builder per hook kind of the patch table (patch_points.HOOKS).

Every wrapper calls vLLM's function unchanged and returns (or raises) exactly what it did; our part never
raises into it. A span-family hook (span, spawn, ready, guard) opens a span around the call unless vLLM traces
the call itself, then applies its kind's effect (spawn: the child's environment; ready: this process's start
ends; guard: an escaping exception fails it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import causes
from vllm_otel_startup.agent.patch_points import PatchPoint
from vllm_otel_startup.agent.process import ENV_KIND, ENV_LABELS, ENV_PARENT, ENV_RANK, SPAWN_ENV, WORKER

if TYPE_CHECKING:
    from vllm_otel_startup.agent.runtime import Runtime

_log = logging.getLogger("vllm_otel_startup")

Wrapper = Callable[[Any, Any, tuple, dict], Any]  # wrapt's (wrapped, instance, args, kwargs)


@dataclass(frozen=True)
class Hook:
    """What a builder needs to make one patch point's wrapper."""

    rt: Runtime
    tracer: trace.Tracer
    probes: causes.Probes
    point: PatchPoint
    emit_span: bool  # False where vLLM traces the call itself (its span is adopted)
    is_async: bool
    restore: Callable[[], None] | None = None  # puts the original back ("once")

    @property
    def live(self) -> bool:
        return self.rt.active and not self.rt.done

    def probe(self, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
        self.probes.after_call(self.point.probe, span, causes.Call(instance, args, kwargs, result))

    def open_span(self) -> tuple[Any, Any]:
        """(context manager, span) of this call's span, or (None, None) where the call goes untraced."""
        if not (self.emit_span and self.live):
            return None, None
        try:
            span_cm = self.tracer.start_as_current_span(
                self.point.span, record_exception=True, set_status_on_exception=True, end_on_exit=True)
            return span_cm, span_cm.__enter__()
        except Exception:  # noqa: BLE001 - the call goes on untraced
            _log.debug("could not open span %s", self.point.span, exc_info=True)
            return None, None


def build(hook: Hook) -> Wrapper:
    return BUILDERS[hook.point.hook](hook)


# ---- hooks without a span of their own --------------------------------------------------------------------
def _once(h: Hook) -> Wrapper:
    """The first call that succeeds, as a span made after it returned (a failing call, e.g. CUDA init probed
    by a CPU build, is not an error of the start: no span, and the next call is watched)."""
    busy, fired = threading.Lock(), [False]

    def once(wrapped, instance, args, kwargs):
        # nested calls (torch re-enters _lazy_init while initialising) and other threads pass through
        if fired[0] or not h.live or not busy.acquire(blocking=False):
            return wrapped(*args, **kwargs)
        try:
            t0 = time.time_ns()
            result = wrapped(*args, **kwargs)
            t1 = time.time_ns()
        finally:
            busy.release()
        fired[0] = True
        try:
            if h.restore is not None:
                h.restore()
            h.tracer.start_span(h.point.span, start_time=t0).end(end_time=t1)
        except Exception:  # noqa: BLE001
            _log.debug("could not record %s", h.point.span, exc_info=True)
        return result
    return once


def _marker(h: Hook) -> Wrapper:
    """Ends the open bootstrap segment and starts the row's ``segment`` (or none)."""
    def marker(wrapped, instance, args, kwargs):
        if h.live:
            h.rt.close_segment(time.time_ns(), h.point.segment)
        return wrapped(*args, **kwargs)
    return marker


def _cli_main(h: Hook) -> Wrapper:
    """A failure escaping vLLM's CLI fails the start; a CLI that returns before ready has exited."""
    rt = h.rt

    def cli_main(wrapped, instance, args, kwargs):
        try:
            return wrapped(*args, **kwargs)
        except SystemExit as exc:
            if exc.code not in (0, None):
                rt.finish(error=exc)
            raise
        except BaseException as exc:
            rt.finish(error=exc)
            raise
        finally:
            if not rt.done:
                rt.finish(error=rt.last_error, outcome="failed" if rt.last_error else "exited")
    return cli_main


def _enrich(h: Hook) -> Wrapper:
    """The row's probe records attributes for its phase's span."""
    def enrich(wrapped, instance, args, kwargs):
        result = wrapped(*args, **kwargs)
        if h.live:
            h.probe(None, instance, args, kwargs, result)
        return result
    return enrich


def _ctx(h: Hook) -> Wrapper:
    """A span around the context manager the call returns (enter to exit)."""
    def ctx(wrapped, instance, args, kwargs):
        cm = wrapped(*args, **kwargs)
        if not h.live:
            return cm
        # vLLM opens the same monitor inside its AOT-artifact load (_try_load_aot_compiled_fn, our "AOT cache
        # load" span): that is a cache lookup whose failure only means "compile again", so it gets no
        # torch.compile span (and no ERROR); its outcome goes on the load span.
        current = trace.get_current_span()
        if getattr(current, "name", None) == sc.AOT_LOAD_SPAN and current.is_recording():
            return SpanContextManager(cm, None, aot_span=current)
        return SpanContextManager(cm, lambda: h.tracer.start_as_current_span(
            h.point.span, record_exception=True, set_status_on_exception=True))
    return ctx


# ---- span, spawn, ready, guard: a span around the call, then the kind's effect ---------------------------
Effect = Callable[[Hook, "BaseException | None"], None]  # runs after the call's span ended
Env = Callable[[Hook, Any, tuple, dict], "contextlib.AbstractContextManager[None]"]


def _around(h: Hook, effect: Effect | None = None, env: Env | None = None) -> Wrapper:
    """A span around the call (unless vLLM traces it); ``env``: a context manager around the synchronous
    call, given what was current before the span (spawn)."""

    def after(span_cm, span, instance, args, kwargs, result, exc) -> None:
        try:  # never mask the call's own result or exception
            if span is not None and exc is None:
                h.probe(span, instance, args, kwargs, result)
            if exc is not None:
                h.rt.last_error = exc
            if span_cm is not None:
                span_cm.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
            if effect is not None:
                effect(h, exc)
        except Exception:  # noqa: BLE001
            _log.debug("after-hook failed for %s", h.point.target, exc_info=True)

    def sync(wrapped, instance, args, kwargs):
        # a spawned child hangs beside the spawn span, under what was current before it
        parent_ctx = otel_context.get_current() if env is not None else None
        span_cm, span = h.open_span()
        try:
            with env(h, parent_ctx, args, kwargs) if env is not None else contextlib.nullcontext():
                result = wrapped(*args, **kwargs)
        except BaseException as exc:
            after(span_cm, span, instance, args, kwargs, None, exc)
            raise
        after(span_cm, span, instance, args, kwargs, result, None)
        return result

    async def run_async(wrapped, instance, args, kwargs):
        span_cm, span = h.open_span()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            after(span_cm, span, instance, args, kwargs, None, exc)
            raise
        after(span_cm, span, instance, args, kwargs, result, None)
        return result

    if h.is_async:
        def async_wrapper(wrapped, instance, args, kwargs):
            return run_async(wrapped, instance, args, kwargs)
        return async_wrapper
    return sync


@contextlib.contextmanager
def spawn_env(h: Hook, parent_ctx: Any, args: tuple, kwargs: dict) -> Iterator[None]:
    """Around Process.start(): the child's OTEL_PYTHON_VLLM_STARTUP_* variables (trace parent, kind, rank,
    fleet labels) are set for the spawn and restored after it, whatever it did."""
    if not h.live:
        yield
        return
    saved = {k: os.environ.get(k) for k in SPAWN_ENV}
    try:
        try:
            _announce_child(h, parent_ctx, args, kwargs)
        except Exception:  # noqa: BLE001 - the child then starts untraced
            _log.debug("could not hand the trace to the child of %s", h.point.target, exc_info=True)
        yield
    finally:
        for k, v in saved.items():
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


def _guard_effect(h: Hook, exc: BaseException | None) -> None:
    if exc is not None and h.rt.active:
        h.rt.finish(error=exc)


def _ready_effect(h: Hook, exc: BaseException | None) -> None:
    if h.rt.active and h.point.ends == h.rt.info.kind:
        h.rt.finish(error=exc)


BUILDERS: dict[str, Callable[[Hook], Wrapper]] = {
    "span": _around,
    "spawn": lambda h: _around(h, env=spawn_env),
    "ready": lambda h: _around(h, _ready_effect),
    "guard": lambda h: _around(h, _guard_effect),
    "marker": _marker,
    "cli_main": _cli_main,
    "ctx": _ctx,
    "enrich": _enrich,
    "once": _once,
}


class SpanContextManager:
    """Wraps a context manager so that a span covers its enter-to-exit (``start``), or so that an exception
    leaving it is recorded as the outcome of an enclosing AOT-artifact load (``aot_span``)."""

    def __init__(self, cm: Any, start: Any, aot_span: Any = None) -> None:
        self._cm = cm
        self._start = start
        self._aot_span = aot_span
        self._span_cm = None

    def __enter__(self):
        if self._start is not None:
            try:
                self._span_cm = self._start()
                self._span_cm.__enter__()
            except Exception:  # noqa: BLE001
                self._span_cm = None
        return self._cm.__enter__()

    def __exit__(self, exc_type, exc, tb):
        try:
            suppress = self._cm.__exit__(exc_type, exc, tb)
        finally:
            try:
                if self._aot_span is not None and exc is not None:
                    self._aot_span.set_attribute(sc.COMPILE_AOT_LOADED, False)
                    self._aot_span.set_attribute(sc.COMPILE_AOT_LOAD_ERROR, f"{type(exc).__name__}: {exc}"[:300])
                if self._span_cm is not None:
                    self._span_cm.__exit__(exc_type, exc, tb)
            except Exception:  # noqa: BLE001
                pass
        return suppress
