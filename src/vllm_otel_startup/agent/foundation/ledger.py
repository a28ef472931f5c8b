"""This process's ended startup spans and its pending cause attributes: what the gap accounting, the metrics and the
spool are made of. The runtime is one (it inherits this); the span processor and the probes write here."""

from __future__ import annotations

import threading
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.intervals import uncovered


class SpanLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset_ledger()

    def reset_ledger(self) -> None:
        """A new, empty ledger (and lock): a forked child keeps none of its parent's."""
        self._lock = threading.Lock()
        self.pending: dict[str, dict[str, Any]] = {}  # phase -> attributes for that phase's next span end
        self.local: list[tuple[int, int, str, int, int | None, str | None]] = []  # ended startup spans here:
        # (start, end, name, span id, parent span id, phase)
        self.ended: list[Any] = []  # the same spans (SDK ReadableSpan): metrics and the spool are made of them

    def record_local(self, span: Any, interval: bool = True) -> None:
        """Keep an ended startup span; ``interval``: it also counts for this process span's gap accounting."""
        with self._lock:
            if interval:
                parent = span.parent.span_id if span.parent is not None else None
                self.local.append((span.start_time, span.end_time, span.name, span.context.span_id, parent,
                                   (span.attributes or {}).get(sc.PHASE)))
            self.ended.append(span)

    def ended_spans(self) -> list[Any]:
        """This process's ended startup spans so far (a copy, taken under the ledger's lock)."""
        with self._lock:
            return list(self.ended)

    def local_spans(self) -> list[tuple[int, int, str, int, int | None, str | None]]:
        """The gap accounting's spans so far (a copy, taken under the ledger's lock)."""
        with self._lock:
            return list(self.local)

    def gaps(self, start_ns: int, end_ns: int) -> tuple[int, int, str | None]:
        """Time in [start, end] that no leaf span of this process covers (a parent's self time is not
        explained, a waiting span is: it names what this process does); the largest such gap; the span
        before it."""
        spans = self.local_spans()
        parents = {p for *_, p, phase in spans if p is not None and phase not in sc.DETAIL_PHASES}
        leaves = [(s, e, name) for s, e, name, sid, _, phase in spans
                  if sid not in parents or phase in sc.DETAIL_PHASES]
        total, largest, _, after = uncovered(leaves, start_ns, end_ns)
        return total, largest, after

    def add_pending(self, phase: str, attrs: dict[str, Any]) -> None:
        with self._lock:
            self.pending.setdefault(phase, {}).update(attrs)

    def pop_pending(self, phase: str) -> dict[str, Any]:
        with self._lock:
            return self.pending.pop(phase, {})
