"""Each phase span's own resource readings (CPU, memory, disk, GPU memory): a snapshot as the span starts, the
difference to a snapshot as it ends, as the span's attributes."""

from __future__ import annotations

import threading
from typing import Any

from vllm_otel_startup import diagnostics
from vllm_otel_startup.agent.resources.sampler import Sampler, Snapshot


class SpanResources:
    def __init__(self) -> None:
        self.sampler: Sampler | None = None  # this process's sampler, once it runs
        self.off = diagnostics.off("span_resources")  # diagnostics.OFF
        self._snaps: dict[int, Snapshot] = {}  # span id -> resource snapshot at its start
        self._lock = threading.Lock()

    def begin(self, span_id: int) -> None:
        if self.sampler is not None and not self.off:
            snap = self.sampler.snapshot()
            with self._lock:
                self._snaps[span_id] = snap

    def end(self, span_id: int) -> dict[str, Any]:
        with self._lock:
            a = self._snaps.pop(span_id, None)
        return self.sampler.summary(a, self.sampler.snapshot()) if (a is not None and self.sampler) else {}

    def forget(self) -> None:
        """A forked child keeps none of its parent's open readings."""
        self._lock = threading.Lock()
        self._snaps = {}
