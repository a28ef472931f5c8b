"""PyTorch's own torch.compile stages as spans: every ``torch._dynamo.utils.dynamo_timed`` region (Dynamo's
bytecode tracing, AOTAutograd, Inductor's passes, codegen and compile, the FX-graph cache, ...) under the span
that was current when it began, named as PyTorch names it, with its compile id.

``dynamo_timed`` reports every region's start and end to the chromium event logger, a class: wrapping its
methods catches every region whichever module imported ``dynamo_timed`` by name. Cache hits and misses
(PyTorch's instant events: ``fx_graph_cache_hit``, ``autograd_cache_miss``, ...) become span events. Regions
after this process's ready point are not traced (runtime recompiles are not startup). Never raises into torch;
an exception leaving a region is an attribute, not an ERROR (graph breaks raise and are handled inside).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

import wrapt
from opentelemetry import trace

from . import semconv as sc

_PLAIN = (str, bool, int, float)
MAX_DEPTH = 128


def _start_args(event_name: str, time_ns: int, metadata: Any = None, log_pt2_compile_event: bool = False,
                compile_id: Any = None, *_: Any, **__: Any) -> tuple[str, int, Any, Any]:
    return event_name, time_ns, metadata, compile_id


def _end_args(event_name: str, time_ns: int, *_: Any, **__: Any) -> tuple[str, int]:
    return event_name, time_ns


def _instant_args(event_name: str, time_ns: int, metadata: Any = None, *_: Any, **__: Any) -> tuple[str, int, Any]:
    return event_name, time_ns, metadata


def _attrs(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        return {}
    return {f"torch.compile.{k}": v for k, v in metadata.items() if isinstance(v, _PLAIN) and v != "None"}


class CompileStages:
    def __init__(self, rt: Any, tracer: trace.Tracer) -> None:
        self.rt = rt
        self.tracer = tracer
        self._tls = threading.local()
        self._cls: Any = None
        self._originals: dict[str, Any] = {}

    def _stack(self) -> list[tuple[str, Any]]:
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def _on(self) -> bool:
        return self.rt.active and not self.rt.done

    # ---- install -------------------------------------------------------------------------------------
    def install(self, module: Any) -> None:
        cls = getattr(module, "ChromiumEventLogger", None)
        if cls is None or self._cls is not None:
            return
        for attr, fn in (("log_event_start", self._start), ("log_event_end", self._end),
                         ("log_instant_event", self._instant)):
            if attr in vars(cls):
                self._originals[attr] = vars(cls)[attr]
                wrapt.wrap_function_wrapper(cls, attr, fn)
        self._cls = cls

    def uninstall(self) -> None:
        for attr, original in self._originals.items():
            with contextlib.suppress(Exception):
                setattr(self._cls, attr, original)
        self._originals.clear()
        self._cls = None

    # ---- wrappers: torch's own call first, unchanged; then ours, which never raises ---------------------
    def _start(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if self._on():
            try:
                name, t0, metadata, compile_id = _start_args(*args, **kwargs)
                stack = self._stack()
                if len(stack) < MAX_DEPTH:
                    parent = trace.set_span_in_context(stack[-1][1]) if stack else None
                    attrs = {sc.PHASE: "torch_compile_stage", sc.COMPILE_REGION: str(name), **_attrs(metadata)}
                    if compile_id is not None:
                        attrs[sc.COMPILE_ID] = str(compile_id)
                    stack.append((name, self.tracer.start_span(str(name), context=parent, start_time=int(t0),
                                                               attributes=attrs)))
            except Exception:  # noqa: BLE001
                pass
        return result

    def _end(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        failed = sys.exc_info()[1]  # log_event_end runs in dynamo_timed's finally: the exception in flight
        result = wrapped(*args, **kwargs)
        try:
            name, t1 = _end_args(*args, **kwargs)
            stack = self._stack()
            at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == name), None)
            while at is not None and len(stack) > at:  # an end without a start is ignored; missed ends close
                region, span = stack.pop()
                if region == name and failed is not None:
                    span.set_attribute(sc.COMPILE_REGION_EXCEPTION, type(failed).__name__)
                span.end(end_time=int(t1))
        except Exception:  # noqa: BLE001
            pass
        return result

    def _instant(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if self._on():
            try:
                name, t, metadata = _instant_args(*args, **kwargs)
                stack = self._stack()
                span = stack[-1][1] if stack else trace.get_current_span()
                if span.is_recording():
                    span.add_event(str(name), attributes=_attrs(metadata), timestamp=int(t))
            except Exception:  # noqa: BLE001
                pass
        return result
