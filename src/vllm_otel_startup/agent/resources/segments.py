"""A process's bootstrap segments (interpreter start, imports, CLI, event loop, process entry): the spans that cut its
process span before its first phase, each with the resource readings over it (the sampler's snapshots at its ends)."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry import trace

from vllm_otel_startup.agent.resources.sampler import Sampler, Snapshot


class Segments:
    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.sampler: Sampler | None = None
        self.parent: Any = None  # the process span
        self.open: tuple[str, int] | None = None  # the open segment (name, start ns): a span made when it closes
        self._snap: Snapshot | None = None
        self._lock = threading.Lock()
        self._later: list[tuple[Any, ...]] = []  # segments made when the open one closes (emit(later=True))

    def begin(self, name: str, at_ns: int, snap: Snapshot | None) -> None:
        self.open, self._snap = (name, at_ns), snap

    def emit(self, name: str, start_ns: int, end_ns: int, a: Snapshot | None = None,
             b: Snapshot | None = None, later: bool = False) -> None:
        """The span of a segment that is over; ``later``: made when the open segment closes (while a process imports,
        a span that ended has the SDK's batch processor export it on its thread, beside the imports)."""
        if later:
            self._later.append((name, start_ns, end_ns, a, b))
            return
        if end_ns <= start_ns or self.parent is None:
            return
        attrs = self.sampler.summary(a, b) if (self.sampler and a and b) else None
        span = self.tracer.start_span(name, context=trace.set_span_in_context(self.parent), start_time=start_ns,
                                      attributes=attrs)
        span.end(end_time=end_ns)

    def emit_later(self) -> None:
        """Make the segments held for the open one's close now (a start that ends before its imports did)."""
        with self._lock:
            later, self._later = self._later, []
        for args in later:
            self.emit(*args)

    def close(self, at_ns: int, next_name: str | None = None, more: bool = True) -> None:
        """End the open segment at ``at_ns``; open ``next_name`` from there (unless ``more`` is False: the start
        is over)."""
        snap = None
        if self.sampler:
            snap = self.sampler.snapshot()
        self.emit_later()
        with self._lock:
            seg, self.open = self.open, ((next_name, at_ns) if next_name and more else None)
            seg_snap, self._snap = self._snap, snap
        if seg is not None and self.sampler:  # the first segment (the imports) is over
            self.sampler.imports_over()
        if seg is not None:
            self.emit(seg[0], seg[1], at_ns, seg_snap, snap)
