"""Adoption of vLLM's own startup spans into our vocabulary, and the startup window.

The span processor tags every startup span (vLLM's or ours) with its phase and process kind, closes
the open bootstrap segment when a phase begins, runs the phase's cause probes, attaches the span's
resource summary (CPU, memory, disk, GPU), scrubs what the span carries (attributes, events such as the
recorded exception's message and stack trace, the status message: ``model/redact.py``) and keeps the
ended spans for the gap accounting, the metrics and the spool; with ``EXPORT_EACH_PHASE`` a phase's end wakes the
export threads (nudge.py), so a process killed right after it keeps it. The sampler drops vLLM's startup-span names once
this process is past ready, so later recompiles or dummy runs while serving never look like startup.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Status

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.guard import HOOKS, SPANS, failed, safe
from vllm_otel_startup.agent.foundation.patch_points import NATIVE_SPANS, SEGMENT_SPANS, SPAN_PHASES, WAITING_SPANS
from vllm_otel_startup.agent.foundation.span_store import END_TIMES
from vllm_otel_startup.model.redact import scrub, scrub_attributes, scrubbed


class PhaseProbes(Protocol):
    """The cause probes around a phase's spans (causes.Probes)."""

    def on_start(self, phase: str, span: Any) -> None: ...

    def on_ending(self, phase: str, span: Any) -> None: ...


class SpanReadings(Protocol):
    """A span's own resource readings (resources.SpanResources)."""

    def begin(self, span_id: int) -> None: ...

    def end(self, span_id: int) -> dict[str, Any]: ...


class SpanHost(Protocol):
    """What the span processor needs of this process's start (the runtime is one)."""

    active: bool
    done: bool
    info: Any  # foundation.process.ProcessInfo
    process_span: Any
    probes: PhaseProbes
    resources: SpanReadings
    native_phases: dict[str, str]  # span name -> phase: vLLM's own spans under names we do not list
    native_effects: dict[str, Callable[[BaseException | None], None]]  # span name -> a row's effect at its end
    live: Any  # live.Live, or None
    sampler: Any  # resources.sampler.Sampler, or None: ticks fast while a waiting span is open
    retro: Any  # resources.RetroSpans, or None
    nudge: Any  # export.nudge.ExportNudge
    cost: Any  # foundation.self_cost.MainThreadCost

    def close_segment(self, at_ns: int, next_name: str | None = None) -> None: ...

    def pop_pending(self, phase: str) -> dict[str, Any]: ...

    def record_local(self, span: Any, interval: bool = True) -> None: ...

_log = logging.getLogger("vllm_otel_startup")
# made after the fact, or too many and too short (PyTorch's compile regions): no resource readings of their own
RETRO = frozenset({sc.GC_SPAN, sc.IMPORT_SPAN})


# vLLM names two nested calls `Worker init` (WorkerProc.__init__ around WorkerWrapperBase.init_worker, which builds
# the worker object): the inner one is renamed, so that no two nested spans share a name
NESTED_RENAMES = {sc.WORKER_INIT_SPAN: sc.WORKER_CONSTRUCTION_SPAN}


class StartupSpanProcessor(SpanProcessor):
    def __init__(self, rt: SpanHost, probes: PhaseProbes | None = None) -> None:
        self.rt = rt
        self.probes = probes if probes is not None else rt.probes
        self.open_names: dict[int, str] = {}  # span id -> name, of this process's open spans of NESTED_RENAMES
        # span id -> [a row's effect at the end of vLLM's span, the exception it recorded] (Runtime.native_effects)
        self.native_ends: dict[int, list[Any]] = {}
        self.waiting: dict[int, Any] = {}  # span id -> the sampler told, of this process's open waiting spans

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        rt = self.rt
        if not rt.active or rt.done:
            return
        t0 = time.perf_counter_ns()
        try:
            self._on_start(rt, span)
        finally:
            rt.cost.add(t0)

    def _on_start(self, rt: SpanHost, span: Any) -> None:
        native = span.instrumentation_scope is None or span.instrumentation_scope.name != sc.INSTRUMENTATION_NAME
        phase = SPAN_PHASES.get(span.name) or (rt.native_phases.get(span.name) if native else None)
        if phase is None and not native:  # ours with a phase of its own (PyTorch's compile regions)
            phase = (span.attributes or {}).get(sc.PHASE)
        if phase is None:
            return
        try:
            if span.name in NESTED_RENAMES and span.context is not None:
                parent = getattr(span, "parent", None)
                if parent is not None and self.open_names.get(parent.span_id) == span.name:
                    span.update_name(NESTED_RENAMES[span.name])
                else:
                    self.open_names[span.context.span_id] = span.name
            attrs: dict[str, Any] = {sc.PHASE: phase, sc.PROCESS_KIND: rt.info.kind}
            if native:
                attrs[sc.NATIVE] = True
            if span.name in WAITING_SPANS:
                attrs[sc.WAITING] = True
                if span.context is not None:  # its main thread idles: sample fast, export on the SDK's schedule
                    self.waiting[span.context.span_id] = rt.sampler
                    _waiting_changed(rt, rt.sampler, 1)
            span.set_attributes(attrs)
            effect = rt.native_effects.get(span.name) if native and span.context is not None else None
            if effect is not None:  # a ready or guard row vLLM traces itself: its effect as this span ends
                self.native_ends[span.context.span_id] = entry = [effect, None]
                _keep_exception(span, entry)
            if rt.live is not None and span.context is not None:
                rt.live.opened(span, phase)
            if span is not rt.process_span and span.name not in SEGMENT_SPANS and span.name not in RETRO \
                    and phase != "torch_compile_stage" and span.start_time:
                rt.close_segment(span.start_time)
                rt.resources.begin(span.context.span_id)
            self.probes.on_start(phase, span)
            if span is not rt.process_span:
                _run_before_end(span, self._before_end)
            _scrub_events(span)
        except Exception:  # noqa: BLE001
            failed(SPANS, f"start of span {span.name!r}")

    def _before_end(self, span: Any) -> None:
        """Runs while the span is still writable: pending cause attributes, the phase's end probe, the scrub."""
        rt = self.rt
        t0 = time.perf_counter_ns()
        entry = self.native_ends.get(span.context.span_id)
        if entry is not None and entry[1] is None:
            # OpenTelemetry records an Exception only; a SystemExit (vLLM's SIGTERM handler) or KeyboardInterrupt
            # leaving vLLM's call is the one propagating through its span's end
            exc = sys.exc_info()[1]
            if exc is not None and not isinstance(exc, Exception):
                entry[1] = exc
        phase = (span.attributes or {}).get(sc.PHASE)
        if phase is not None and rt.active:
            try:
                pending = rt.pop_pending(phase)
                if pending:
                    span.set_attributes(pending)
                span.set_attributes(rt.resources.end(span.context.span_id))
                self.probes.on_ending(phase, span)
                if rt.retro is not None:
                    rt.retro.emit_children(span)
            except Exception:  # noqa: BLE001
                failed(SPANS, f"end of span {span.name!r}")
        scrub_span(span)
        rt.cost.add(t0)

    def on_end(self, span: Any) -> None:
        t0 = time.perf_counter_ns()
        safe(SPANS, self._on_end, span)
        self.rt.cost.add(t0)  # the SDK calls span processors unguarded, from vLLM's own span.end()

    def _on_end(self, span: Any) -> None:
        rt = self.rt
        self.open_names.pop(span.context.span_id, None)
        native_end = self.native_ends.pop(span.context.span_id, None)
        if span.context.span_id in self.waiting:
            _waiting_changed(rt, self.waiting.pop(span.context.span_id), -1)
        if not rt.active or rt.process_span is None:
            return
        is_process = span.context.span_id == rt.process_span.get_span_context().span_id  # on_end: a read-only copy
        phase = (span.attributes or {}).get(sc.PHASE)
        if rt.live is not None and phase is not None:
            rt.live.closed(span.context.span_id)
        if phase is not None and span.start_time and span.end_time:
            rt.record_local(span, interval=not is_process)
            if phase not in sc.DETAIL_PHASES and phase not in sc.BURST_PHASES:
                rt.nudge.notify()  # EXPORT_EACH_PHASE: export it now, not at the batch processor's next tick
        if native_end is not None:  # after the span is recorded: the effect may end this process's start
            effect, exc = native_end
            safe(HOOKS, effect, exc)

    def shutdown(self) -> None:  # the end of an unfinished start is handled by our atexit hook
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _waiting_changed(rt: SpanHost, sampler: Any, delta: int) -> None:
    """A waiting span of this process opened (+1) or ended (-1): the sampler (the one it opened under) and the
    export's pace follow."""
    if sampler is not None:
        sampler.waiting_changed(delta)
    rt.nudge.waiting_changed(delta)


def _run_before_end(span: Any, hook: Any) -> None:
    """Make ``span.end()`` call ``hook(span)`` first. SDK span processors only see ended, read-only
    spans (``_on_ending`` runs after the attributes are frozen in SDK 1.45), so the instance's own end
    is shadowed instead: vLLM's ``with start_as_current_span(...)`` ends through it too."""
    original = span.end

    def end(end_time: int | None = None) -> None:
        if span.is_recording():
            # the end is taken before the hook runs: what the hook derives from the span's duration (GB/s) is
            # over the duration the span will carry, and the hook's own time is not counted in the phase
            end_time = end_time or time.time_ns()
            END_TIMES.set(span, end_time)
            hook(span)
        original(end_time=end_time)

    span.end = end


def _keep_exception(span: Any, entry: list[Any]) -> None:
    """Keep the exception vLLM's ``start_as_current_span`` records on ``span`` (``entry[1]``): the failure of a call
    vLLM traces itself, for its row's effect (the start's outcome and error type)."""
    original = span.record_exception

    def record_exception(exception: BaseException, *args: Any, **kwargs: Any) -> None:
        entry[1] = exception
        original(exception, *args, **kwargs)

    span.record_exception = record_exception


def _scrub_events(span: Any) -> None:
    """Scrub every event as it is added (``record_exception`` adds its event through ``add_event``): an event
    cannot be changed once added."""
    original = span.add_event

    def add_event(name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        if attributes:
            try:
                attributes = scrubbed(attributes)
            except Exception:  # noqa: BLE001 - fail closed: an event we could not scrub leaves without attributes
                failed(SPANS, f"scrub of event {name!r}")
                attributes = None
        original(name, attributes=attributes, timestamp=timestamp)

    span.add_event = add_event


def scrub_span(span: Any) -> None:
    """Scrub a still-writable span's attributes and status message (never raises)."""
    try:
        changed = scrub_attributes(span.attributes)
        if changed:
            span.set_attributes(changed)
        status = span.status
        if status.description:
            clean = scrub(status.description)
            if clean != status.description:
                span.set_status(Status(status.status_code, clean))
    except Exception:  # noqa: BLE001
        failed(SPANS, f"scrub of span {getattr(span, 'name', '?')!r}")


def _switched_off(sampler: Sampler) -> bool:
    """always_off (or parent-based with an always_off root): the operator wants no traces at all (seen through
    our configurator's fragments.NativeFragmentFilter)."""
    from vllm_otel_startup.agent.foundation.fragments import NativeFragmentFilter

    while isinstance(sampler, NativeFragmentFilter):
        sampler = sampler.delegate
    desc = sampler.get_description()
    return desc == "AlwaysOffSampler" or desc.startswith("ParentBased{root:AlwaysOffSampler")


class StartupSampler(Sampler):
    """Keeps the start's trace whole and delegates the rest: until this process is ready every span is sampled (a
    ratio or parent-based sampler meant for request traffic would drop whole starts, or, with its per-process
    decision, parts of one), unless the configured sampler is always_off; after ready it delegates, and drops vLLM's
    startup-span names (a recompile while serving is not startup)."""

    def __init__(self, delegate: Sampler, rt: SpanHost | None = None) -> None:
        self.delegate = delegate
        self.rt = rt  # set once the runtime exists (the tracer it holds is made after this sampler is in place)
        self.off = _switched_off(delegate)

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:  # noqa: PLR0913
        rt = self.rt
        if rt is not None and not self.off:
            if not rt.done:
                return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, _trace_state(parent_context))
            if name in NATIVE_SPANS or name in rt.native_phases:
                return SamplingResult(Decision.DROP)
        return self.delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"VllmStartupWindow{{{self.delegate.get_description()}}}"


def _trace_state(parent_context: Any) -> Any:
    """The parent's trace state, kept as the SDK's own samplers keep it."""
    from opentelemetry.trace import get_current_span

    ctx = get_current_span(parent_context).get_span_context()
    return ctx.trace_state if ctx is not None and ctx.is_valid else None
