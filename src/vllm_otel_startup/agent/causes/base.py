"""The cause probes' typed base: :class:`Call` (one patched call as a probe sees it; foundation/calls.py: the patch
wrappers make it), :class:`Probe` (the hooks, each a no-op) and the helpers several families share (throughput
over a span, file system and size of a file).

A probe is a small object that keeps its own state; ``causes.Probes`` holds one of each per process and
invokes them fail-soft (a probe that fails only loses its attributes):
  after_call(rt, span, call)   after a patched call returns (the patch table's ``probe`` names it); ``span``
      is our span for that call, or None when the call is not ours (enrich hooks): then the probe records
      pending attributes for the phase's span instead.
  on_start(rt, span) / on_ending(rt, span)   around any span of the probe's ``phase``, native or ours, from
      the span processor (``on_ending`` runs while the span is still writable).
Standard library only: the package imports this module in every instrumented process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from vllm_otel_startup.agent.foundation.calls import Call  # noqa: F401 - re-exported: the probes' input
from vllm_otel_startup.agent.foundation.span_store import END_TIMES


class ProbeHost(Protocol):
    """What a probe reads and writes of this process's start (the runtime is one)."""

    info: Any  # foundation.process.ProcessInfo (its creation time)
    facts: dict[str, Any]  # attributes for the process span, set at its end
    pending: dict[str, dict[str, Any]]  # phase -> attributes for that phase's next span end
    local: list[tuple[int, int, str, int, int | None, str | None]]  # ended startup spans (foundation.ledger)

    def add_pending(self, phase: str, attrs: dict[str, Any]) -> None: ...


class Probe:
    """Base: every hook does nothing. ``name``: the patch table's probe name; ``phase``: the spans it watches."""

    name: ClassVar[str | None] = None
    names: ClassVar[tuple[str, ...]] = ()  # several patch-table probe names served by one probe (call.kind says which)
    phase: ClassVar[str | None] = None

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        return None

    def on_start(self, rt: ProbeHost, span: Any) -> None:
        return None

    def on_ending(self, rt: ProbeHost, span: Any) -> None:
        return None

    def uninstall(self) -> None:
        """Undo what the probe patched (call counters)."""
        return None


def filesystem_of(path: str) -> str | None:
    """The file-system type of the mount holding ``path`` (its real path), as /proc/self/mounts names it."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    best, fs_type = -1, None
    for m in mounts:
        if len(m) < 3:
            continue
        point = m[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, fs_type = len(point), m[2]
    return fs_type


def span_attributes(span: Any) -> Mapping[str, Any]:
    """A span's attributes so far: only an SDK span has them (a NonRecordingSpan, OTEL_SDK_DISABLED or a sampler
    that dropped the trace, has none); a probe never assumes a recording span."""
    return getattr(span, "attributes", None) or {}


def span_start_ns(span: Any) -> int | None:
    """A span's start time, None where the span records nothing (see span_attributes)."""
    return getattr(span, "start_time", None)


def gb_per_s(nbytes: Any, span: Any) -> float | None:
    """Throughput of ``nbytes`` moved during ``span`` (ending now: its end time is already taken), GB/s of 10^9
    bytes, over exactly the duration the span will carry."""
    start_ns = span_start_ns(span)
    if not nbytes or not start_ns:
        return None
    seconds = ((END_TIMES.get(span) or time.time_ns()) - start_ns) / 1e9
    return round(nbytes / seconds / 1e9, 4) if seconds > 0 else None


def _file_size(path: Any) -> int | None:
    try:
        return os.path.getsize(os.fspath(path)) if path is not None else None
    except (OSError, TypeError):
        return None
