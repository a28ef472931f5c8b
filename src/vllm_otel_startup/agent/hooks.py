"""Resolution of the patch-point table into wrapt wrappers, lazily, when each target module is imported.

A target that vLLM already traces itself gets no second span (only its side effects: ready, spawn);
a target inherited from a base class is left to the base's row; a target absent from a version that
should define it is logged once and recorded on the process span. Nothing here raises into vLLM.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import causes
from vllm_otel_startup.agent.compile_stages import CompileStages
from vllm_otel_startup.agent.patch_points import PatchPoint, by_module
from vllm_otel_startup.agent.process import ENV_KIND, ENV_LABELS, ENV_PARENT, ENV_RANK, SPAWN_ENV, WORKER
from vllm_otel_startup.agent.versions import vllm_version

if TYPE_CHECKING:
    from vllm_otel_startup.agent.runtime import Runtime

_log = logging.getLogger("vllm_otel_startup")
_MARK = "_self_vllm_otel_startup"
AOT_LOAD_SPAN = sc.AOT_LOAD_SPAN


def in_range(spec: str, ver: str | None) -> bool:
    if ver is None:
        return True
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(Version(ver).base_version) in SpecifierSet(spec)
    except InvalidVersion:
        return True


def is_native(fn: Any) -> bool:
    """True when ``fn`` is wrapped by vLLM's own ``@instrument`` (vllm/tracing/otel.py)."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    return (
        getattr(fn, "__wrapped__", None) is not None
        and code is not None
        and code.co_filename.replace(os.sep, "/").endswith("tracing/otel.py")
    )


def _resolve(module: Any, qualname: str) -> tuple[Any, str, Any] | None:
    """(parent, attribute, raw object) with the raw object taken from the owner's own __dict__."""
    parent = module
    parts = qualname.split(".")
    for part in parts[:-1]:
        parent = getattr(parent, part, None)
        if parent is None:
            return None
    name = parts[-1]
    if inspect.isclass(parent):
        if name not in vars(parent):
            return (parent, name, _INHERITED) if hasattr(parent, name) else None
        return parent, name, vars(parent)[name]
    if not hasattr(parent, name):
        return None
    return parent, name, getattr(parent, name)


_INHERITED = object()


class Installer:
    def __init__(self, rt: Runtime, tracer: trace.Tracer, version: str | None = None,
                 probes: causes.Probes | None = None) -> None:
        self.rt = rt
        self.probes = probes if probes is not None else causes.Probes(rt)
        self.version = version
        self.tracer = tracer
        self.enabled = True
        self.status: dict[str, str] = {}  # target -> applied | native | inherited | out_of_range | missing
        self._undo: list[tuple[Any, str, Any]] = []
        self.compile_stages: CompileStages | None = None

    def install(self) -> None:
        for module, points in by_module().items():
            wrapt.register_post_import_hook(lambda mod, pts=points: self.apply(mod, pts), module)
        self.compile_stages = CompileStages(self.rt, self.tracer)
        wrapt.register_post_import_hook(self._install_compile_stages, "torch._dynamo.utils")

    def _install_compile_stages(self, module: Any) -> None:
        if not self.enabled:
            return
        try:
            self.compile_stages.install(module)
        except Exception:  # noqa: BLE001
            _log.warning("vllm-otel-startup: could not trace torch.compile's stages; skipped", exc_info=True)

    def uninstall(self) -> None:
        self.enabled = False
        if self.compile_stages is not None:
            self.compile_stages.uninstall()
        for parent, name, original in reversed(self._undo):
            try:
                setattr(parent, name, original)
            except Exception:  # noqa: BLE001
                _log.debug("could not restore %s", name, exc_info=True)
        self._undo.clear()

    def apply(self, module: Any, points: list[PatchPoint]) -> None:
        if not self.enabled:
            return
        for point in points:
            try:
                self._apply_one(module, point)
            except Exception:  # noqa: BLE001 - a bad patch point is skipped, never raised
                self.status[point.target] = "error"
                _log.warning("vllm-otel-startup: could not patch %s; skipped", point.target, exc_info=True)

    def _apply_one(self, module: Any, point: PatchPoint) -> None:
        ver = self.version or vllm_version()
        if not in_range(point.versions, ver):
            self.status[point.target] = "out_of_range"
            return
        found = _resolve(module, point.qualname)
        if found is None:
            self.status[point.target] = "missing"
            self.rt.patch_missing.append(point.target)
            _log.warning("vllm-otel-startup: %s not found in vLLM %s (%s pid %d); that phase is not traced",
                         point.target, ver, self.rt.info.kind, os.getpid())
            return
        parent, name, raw = found
        if raw is _INHERITED:
            self.status[point.target] = "inherited"
            return
        if getattr(raw, _MARK, None):
            self.status[point.target] = "applied"
            return
        native = is_native(raw)
        if native:
            self.rt.patch_native += 1
            if point.hook in ("span", "ctx"):  # nothing to add: vLLM's span is adopted by the processor
                self.status[point.target] = "native"
                return
        func = getattr(raw, "__func__", raw)
        is_async = inspect.iscoroutinefunction(func)

        def restore() -> None:  # a "once" hook puts the original back after its first call
            with contextlib.suppress(Exception):
                setattr(parent, name, raw)

        wrapper = self._wrapper(point, emit_span=bool(point.span) and not native, is_async=is_async,
                                restore=restore)
        wrapt.wrap_function_wrapper(parent, name, wrapper)
        new = vars(parent)[name] if inspect.isclass(parent) else getattr(parent, name)
        with contextlib.suppress(Exception):
            setattr(new, _MARK, point.target)
        self._undo.append((parent, name, raw))
        self.rt.patch_applied += 1
        self.status[point.target] = "native" if native else "applied"

    # ---- wrappers -----------------------------------------------------------------------------------
    def _wrapper(self, point: PatchPoint, emit_span: bool, is_async: bool, restore: Any = None):
        rt = self.rt
        hook = point.hook

        if hook == "once":
            # the first call that succeeds, as a span made after it returned (a failing call, e.g. CUDA init
            # probed by a CPU build, is not an error of the start: no span, and the next call is watched)
            busy, fired = threading.Lock(), [False]

            def once(wrapped, instance, args, kwargs):
                # nested calls (torch re-enters _lazy_init while initialising) and other threads pass through
                if fired[0] or not rt.active or rt.done or not busy.acquire(blocking=False):
                    return wrapped(*args, **kwargs)
                try:
                    t0 = time.time_ns()
                    result = wrapped(*args, **kwargs)
                    t1 = time.time_ns()
                finally:
                    busy.release()
                fired[0] = True
                try:
                    if restore is not None:
                        restore()
                    self.tracer.start_span(point.span, start_time=t0).end(end_time=t1)
                except Exception:  # noqa: BLE001
                    _log.debug("could not record %s", point.span, exc_info=True)
                return result
            return once

        if hook == "marker":
            def marker(wrapped, instance, args, kwargs):
                if rt.active and not rt.done:
                    rt.close_segment(time.time_ns(), point.segment)
                return wrapped(*args, **kwargs)
            return marker

        if hook == "cli_main":
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

        def run_probe(span, instance, args, kwargs, result):
            self.probes.after_call(point.probe, span, causes.Call(instance, args, kwargs, result))

        if hook == "enrich":
            def enrich(wrapped, instance, args, kwargs):
                result = wrapped(*args, **kwargs)
                if rt.active and not rt.done:
                    run_probe(None, instance, args, kwargs, result)
                return result
            return enrich

        if hook == "ctx":
            def ctx(wrapped, instance, args, kwargs):
                cm = wrapped(*args, **kwargs)
                if not rt.active or rt.done:
                    return cm
                # vLLM opens the same monitor inside its AOT-artifact load (_try_load_aot_compiled_fn, our
                # "AOT cache load" span): that is a cache lookup whose failure only means "compile again", so
                # it gets no torch.compile span (and no ERROR); its outcome goes on the load span.
                current = trace.get_current_span()
                if getattr(current, "name", None) == AOT_LOAD_SPAN and current.is_recording():
                    return _SpanContextManager(cm, None, aot_span=current)
                return _SpanContextManager(cm, lambda: self.tracer.start_as_current_span(
                    point.span, record_exception=True, set_status_on_exception=True))
            return ctx

        def before():
            if not (emit_span and rt.active and not rt.done):
                return None, None
            try:
                span_cm = self._start(point)
                return span_cm, span_cm.__enter__()
            except Exception:  # noqa: BLE001 - the call goes on untraced
                _log.debug("could not open span %s", point.span, exc_info=True)
                return None, None

        def spawn_env(parent_ctx, args, kwargs):
            if hook != "spawn" or not rt.active or rt.done:
                return None
            saved = {k: os.environ.get(k) for k in SPAWN_ENV}
            carrier: dict[str, str] = {}
            from opentelemetry.propagate import inject

            inject(carrier, context=parent_ctx)
            if "traceparent" in carrier:
                os.environ[ENV_PARENT] = carrier["traceparent"]
                os.environ[ENV_KIND] = point.child or ""
                os.environ[ENV_LABELS] = json.dumps(rt.fleet())
                rank = kwargs.get("rank", args[2] if point.child == WORKER and len(args) > 2 else None)
                if isinstance(rank, int):
                    os.environ[ENV_RANK] = str(rank)
                else:
                    os.environ.pop(ENV_RANK, None)
            return saved

        def restore_env(saved):
            if saved is None:
                return
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        def after(span_cm, span, instance, args, kwargs, result, exc):
            try:
                _after(span_cm, span, instance, args, kwargs, result, exc)
            except Exception:  # noqa: BLE001 - never mask the call's own result or exception
                _log.debug("after-hook failed for %s", point.target, exc_info=True)

        def _after(span_cm, span, instance, args, kwargs, result, exc):
            if span is not None and exc is None:
                run_probe(span, instance, args, kwargs, result)
            if exc is not None:
                rt.last_error = exc
            if span_cm is not None:
                if exc is not None:
                    span_cm.__exit__(type(exc), exc, exc.__traceback__)
                else:
                    span_cm.__exit__(None, None, None)
            if hook == "guard" and exc is not None and rt.active:
                rt.finish(error=exc)
            if hook == "ready" and rt.active and point.ends == rt.info.kind:
                rt.finish(error=exc)

        def sync(wrapped, instance, args, kwargs):
            # a spawned child hangs beside the spawn span, under what was current before it
            parent_ctx = otel_context.get_current() if hook == "spawn" else None
            span_cm, span = before()
            saved = spawn_env(parent_ctx, args, kwargs)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                restore_env(saved)
                after(span_cm, span, instance, args, kwargs, None, exc)
                raise
            restore_env(saved)
            after(span_cm, span, instance, args, kwargs, result, None)
            return result

        async def run_async(wrapped, instance, args, kwargs):
            span_cm, span = before()
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                after(span_cm, span, instance, args, kwargs, None, exc)
                raise
            after(span_cm, span, instance, args, kwargs, result, None)
            return result

        if is_async:
            def async_wrapper(wrapped, instance, args, kwargs):
                return run_async(wrapped, instance, args, kwargs)
            return async_wrapper
        return sync

    def _start(self, point: PatchPoint):
        return self.tracer.start_as_current_span(
            point.span, record_exception=True, set_status_on_exception=True, end_on_exit=True
        )


class _SpanContextManager:
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
