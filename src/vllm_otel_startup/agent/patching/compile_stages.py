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

from opentelemetry import trace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import guard
from vllm_otel_startup.agent.foundation.wrapping import wrap
from vllm_otel_startup.agent.patching.host import PatchHost

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


MIN_NS = 1_000_000  # a region shorter than 1 ms gets no span of its own (a cold GPU compile has thousands)


class _Region:
    __slots__ = ("name", "t0", "attrs", "parent", "span")

    def __init__(self, name: str, t0: int, attrs: dict[str, Any], parent: Any) -> None:
        self.name, self.t0, self.attrs, self.parent, self.span = name, t0, attrs, parent, None


class CompileStages:
    """Regions are kept on a per-thread stack and become spans lazily: when they end after at least
    ``MIN_NS``, or when a region inside them does (so a span's parent always exists before it)."""

    def __init__(self, rt: PatchHost, tracer: trace.Tracer) -> None:
        self.rt = rt
        self.tracer = tracer
        self._tls = threading.local()
        self._cls: Any = None
        self._originals: dict[str, Any] = {}

    def _stack(self) -> list[_Region]:
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
                wrap(cls, attr, fn)
        self._cls = cls

    def uninstall(self) -> None:
        for attr, original in self._originals.items():
            with contextlib.suppress(Exception):
                setattr(self._cls, attr, original)
        self._originals.clear()
        self._cls = None

    # ---- spans ---------------------------------------------------------------------------------------
    def _materialise(self, stack: list[_Region], upto: int) -> None:
        """Give every region up to ``stack[upto]`` its span, outermost first."""
        for i in range(upto + 1):
            r = stack[i]
            if r.span is None:
                parent = stack[i - 1].span if i else r.parent
                r.span = self.tracer.start_span(r.name, context=trace.set_span_in_context(parent),
                                                start_time=r.t0, attributes=r.attrs)

    # ---- wrappers: torch's own call first, unchanged; then ours, guarded (guard.safe) ---------------------
    def _start(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        guard.safe(guard.HOOKS, self._started, args, kwargs)
        return result

    def _started(self, args: tuple, kwargs: dict) -> None:
        if not self._on():
            return
        name, t0, metadata, compile_id = _start_args(*args, **kwargs)
        stack = self._stack()
        if len(stack) < MAX_DEPTH:
            attrs = {sc.PHASE: "torch_compile_stage", sc.COMPILE_REGION: str(name)}
            cid = compile_id if compile_id is not None else (metadata or {}).get("compile_id")
            if cid is not None and str(cid) != "None":
                attrs[sc.COMPILE_ID] = str(cid)
            parent = None
            if not stack:  # outermost: under the current span (a compile thread has none: the process's)
                parent = trace.get_current_span()
                if not parent.is_recording():
                    parent = self.rt.process_span
            stack.append(_Region(str(name), int(t0), attrs, parent))

    def _end(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        failed = sys.exc_info()[1]  # log_event_end runs in dynamo_timed's finally: the exception in flight
        ending = guard.safe(guard.HOOKS, self._ending, instance, args, kwargs)
        result = wrapped(*args, **kwargs)
        if ending is not None:  # None: an end without a start (or one we could not read): ignored
            guard.safe(guard.HOOKS, self._ended, *ending, failed)
        return result

    def _ending(self, instance: Any, args: tuple, kwargs: dict) -> tuple[int, int, bool, Any] | None:
        """Before torch's end: (the region's place on the stack, its end time, whether it is a span, what torch
        attached while it ran: torch drops it at the end, e.g. cache_state)."""
        name, t1 = _end_args(*args, **kwargs)
        stack = self._stack()
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].name == name), None)
        if at is None:
            return None
        spanned = int(t1) - stack[at].t0 >= MIN_NS or stack[at].span is not None
        extra = (instance.get_event_data() or {}).get(name) if spanned else None
        return at, int(t1), spanned, extra

    def _ended(self, at: int, t1: int, spanned: bool, extra: Any, failed: BaseException | None) -> None:
        stack = self._stack()
        if spanned:
            self._materialise(stack, at)
        while len(stack) > at:  # regions opened inside it and never closed end with it
            r = stack.pop()
            if r.span is None:
                continue
            if len(stack) == at:  # the region this end is for (the others were left open inside it)
                r.span.set_attributes(_attrs(extra))
                if failed is not None:
                    r.span.set_attribute(sc.COMPILE_REGION_EXCEPTION, type(failed).__name__)
            r.span.end(end_time=t1)

    def _instant(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        guard.safe(guard.HOOKS, self._instant_event, args, kwargs)
        return result

    def _instant_event(self, args: tuple, kwargs: dict) -> None:
        if not self._on():
            return
        name, t, metadata = _instant_args(*args, **kwargs)
        stack = self._stack()
        if stack:  # a cache hit or miss is worth its region's span
            self._materialise(stack, len(stack) - 1)
        span = stack[-1].span if stack else trace.get_current_span()
        if span.is_recording():
            span.add_event(str(name), attributes=_attrs(metadata), timestamp=int(t))
