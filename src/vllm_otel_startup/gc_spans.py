"""Long Python garbage collections as spans ("Garbage collection"), from ``gc.callbacks``.

vLLM calls ``gc.collect()`` itself (twice at the end of every model load: ~0.4 s each with torch's heap),
and full automatic collections during startup take tens to hundreds of milliseconds; without a span that
time is a parent's unexplained self time. The callback only records (a contextvar read and a list append:
no lock is taken inside a collection, which may run while the SDK holds its own locks); the spans are made
when the span that was current at the collection ends, as its children. Collections outside any phase
span (bootstrap segments, between phases) are not emitted.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from typing import Any

from opentelemetry import trace

from . import semconv as sc

MIN_NS = 10_000_000  # shorter collections are noise at startup scale


class GcRecorder:
    def __init__(self, tracer: trace.Tracer, min_ns: int = MIN_NS) -> None:
        self.tracer = tracer
        self.min_ns = min_ns
        self._start: tuple[int, Any] | None = None
        self._found: dict[int, list[tuple[int, int, int, int]]] = {}  # span id -> (start, end, gen, collected)
        self._lock = threading.Lock()  # taken outside collections only
        self.installed = False

    def install(self) -> None:
        if not self.installed:
            gc.callbacks.append(self._callback)
            self.installed = True

    def uninstall(self) -> None:
        if self.installed:
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(self._callback)
            self.installed = False

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        try:
            if phase == "start":
                self._start = (time.time_ns(), trace.get_current_span())
                return
            started, self._start = self._start, None
            if started is None:
                return
            t0, span = started
            t1 = time.time_ns()
            if t1 - t0 < self.min_ns or not span.is_recording():
                return
            entry = (t0, t1, int(info.get("generation", -1)), int(info.get("collected", 0)))
            # dict.setdefault and list.append are atomic under the GIL: no lock inside a collection
            self._found.setdefault(span.get_span_context().span_id, []).append(entry)
        except Exception:  # noqa: BLE001 - never raise inside a collection
            pass

    def emit_children(self, parent: Any) -> None:
        """Make the spans of the collections that ran under ``parent`` (called as ``parent`` ends)."""
        found = self._found.pop(parent.get_span_context().span_id, None)
        if not found:
            return
        ctx = trace.set_span_in_context(parent)
        for t0, t1, generation, collected in found:
            span = self.tracer.start_span(sc.GC_SPAN, context=ctx, start_time=t0, attributes={
                sc.GC_GENERATION: generation, sc.GC_COLLECTED: collected})
            span.end(end_time=t1)
