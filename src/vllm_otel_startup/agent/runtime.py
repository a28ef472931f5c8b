"""Per-process startup state: the process span (the root in the API server), the ready point and failure. The parts
it holds do the rest: the ledger of ended spans (foundation/), the cause probes (causes/), the sampler, each span's
readings, the bootstrap segments and the long-event watchers (resources/), the metrics, the process span's closing
attributes, the ready point's products and a launcher's wait (export/), the start in progress (live/)."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from vllm_otel_startup import diagnostics, settings
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes import Probes
from vllm_otel_startup.agent.export import ready
from vllm_otel_startup.agent.export.nudge import ExportCount, ExportNudge
from vllm_otel_startup.agent.export.observations import process_fleet
from vllm_otel_startup.agent.export.otel_metrics import record_while_starting
from vllm_otel_startup.agent.foundation.kinds import API_SERVER, ENGINE_CORE, WORKER
from vllm_otel_startup.agent.foundation.ledger import SpanLedger
from vllm_otel_startup.agent.foundation.patch_points import PROCESS_SPANS, SPAN_PHASES
from vllm_otel_startup.agent.foundation.patch_record import PatchRecord
from vllm_otel_startup.agent.foundation.process import (
    ProcessInfo,
    model_from_argv,
    process_span_attributes,
    start_mode,
)
from vllm_otel_startup.agent.foundation.self_cost import MainThreadCost
from vllm_otel_startup.agent.foundation.versions import start_facts
from vllm_otel_startup.agent.resources import retro_spans
from vllm_otel_startup.agent.resources.retro_spans import RetroSpans
from vllm_otel_startup.agent.resources.sampler import Sampler, Snapshot
from vllm_otel_startup.agent.resources.segments import Segments
from vllm_otel_startup.agent.resources.span_resources import SpanResources


class Runtime(SpanLedger, PatchRecord):
    """What this process knows about its own start. One instance per process."""

    def __init__(self, info: ProcessInfo, tracer: trace.Tracer, provider: Any) -> None:
        SpanLedger.__init__(self)  # ended spans, pending cause attributes
        PatchRecord.__init__(self)  # what the patch points did here
        self.info, self.tracer, self.provider = info, tracer, provider
        self.active, self.done = info.kind in PROCESS_SPANS, False
        self.process_span: Span | None = None
        self.facts: dict[str, Any] = {}  # attributes for the process span, set at finish
        self.probes = Probes(self)  # the cause probes, each made on first use
        self.sampler: Sampler | None = None
        self.resources = SpanResources()  # each phase span's own readings
        self.nudge = ExportNudge(provider)  # when spans leave while starting: its pace, or each phase at once
        self.exports = ExportCount().install(provider) if settings.flag(settings.DEBUG) else None  # self_cost.py
        self.retro: RetroSpans | None = None  # long garbage collections and imports inside phases, as spans
        self.recorder: Any = None  # otel_metrics.StartupRecorder, made at the ready point
        self.collector: Any = None  # prometheus.StartupCollector (API server)
        self.whole: list[Any] | None = None  # the root at its ready point: the whole start's spans (export/ready.py)
        self.frontends, self._launcher = 0, None  # API servers this launcher spawned, the wait for them (frontends.py)
        self.live: Any = None  # live.Live: the start in progress (series, progress message, status endpoint)
        self.cost = MainThreadCost()  # our span processor's time on vLLM's threads (self_cost.py)
        self.created: Snapshot | None = None  # the resource readings at process creation (or the fork)
        self.segments = Segments(tracer)  # the bootstrap segments before the first phase
        self._tokens: list[object] = []  # the process span's context, attached (one per start here)

    def detach(self) -> None:
        """Leave the process spans' contexts, latest first (uninstrument, tests); the process normally never does."""
        while self._tokens:
            context.detach(self._tokens.pop())

    def stop(self) -> None:
        """Stop observing (uninstrument): span processor inert; nudge, watchers, context, sampler thread end."""
        self.active = False
        self.nudge.stop()
        if self.retro is not None:
            self.retro.uninstall()
        self.detach()
        if self.sampler is not None:
            self.sampler.stop_now(1.0)

    # the open bootstrap segment (name, start ns): a span made when it closes
    open_segment = property(lambda self: self.segments.open)

    def trace_id(self) -> str:
        return f"{self.process_span.get_span_context().trace_id:032x}" if self.process_span else ""

    def after_fork_in_child(self) -> None:
        """A forked child inherits this process's state (hooks, provider, even our runtime) but runs no
        sitecustomize: become the EngineCore / worker the parent announced, or go quiet."""
        kind = settings.text(settings.CHILD_KIND)
        self.reset_ledger()
        if self.live is not None:  # the parent's status socket and thread are not this process's
            self.live.forget_in_child()
            self.live = None
        if not self.active or kind not in (ENGINE_CORE, WORKER):
            self.active, self.done = False, True
            return
        self._again(ProcessInfo.forked(kind, self.info.argv), sc.PROCESS_ENTRY_SPAN)

    def next_start(self) -> None:
        """A program that built an engine builds another once that start is over (a sweep, a retry): a start, a trace
        of its own from this construction on; the patches stay, the last start's sampler ends its tail alone."""
        self.probes.reset()
        self._again(ProcessInfo.next_engine(self.info.argv), None)

    def _again(self, info: ProcessInfo, segment: str | None) -> None:
        """This process starts (again) as ``info``: nothing of the last start's ledger, failures or readings."""
        self.info, self.done, self.facts, self.segments.open = info, False, {}, None
        self.reset_ledger()
        self.reset_failures()
        self.resources.forget()
        self.start(segment=segment)  # a new sampler too (threads do not survive a fork)

    def start(self, segment: str | None = sc.IMPORTS_SPAN) -> None:
        """Open the process span (current from now) and observe; ``segment``: the bootstrap segment from the hook on."""
        info = self.info
        if info.root:
            parent = context.Context()  # a new trace per start
        else:
            tp = settings.text(settings.TRACEPARENT)
            parent = TraceContextTextMapPropagator().extract({"traceparent": tp}) if tp else context.Context()
        name = PROCESS_SPANS[info.kind] if info.root or info.kind != API_SERVER else sc.API_SERVER_PROCESS_SPAN
        attrs = process_span_attributes(info, "startup" if info.root else SPAN_PHASES[name])
        if info.root:
            attrs[sc.MODE] = self.facts[sc.MODE] = start_mode()
            self.facts[sc.MODEL] = model_from_argv(info.argv)  # the resolved config's value replaces it
        self.nudge.start()  # spans leave rarely while this process works; EXPORT_EACH_PHASE: each phase at once
        self.sampler = self.resources.sampler = self.segments.sampler = Sampler(host=info.root)
        importing = segment == sc.IMPORTS_SPAN  # while it imports: no job on our thread, nothing for the exporters
        self.sampler.start(importing=importing)
        if (live_s := settings.seconds_from_ms(settings.LIVE_INTERVAL_MS)) > 0:  # 0: no series, line, status
            from vllm_otel_startup.agent.live.progress import start_live

            self.live = start_live(self, live_s)  # refreshed on the sampler's thread (Sampler.every)
        self.process_span = self.tracer.start_span(name, context=parent, start_time=info.create_ns, attributes=attrs)
        if not diagnostics.off("process_context"):  # the whole process lives under its process span (OFF: diagnostics)
            self._tokens.append(context.attach(trace.set_span_in_context(self.process_span)))
        self.retro = retro_spans.restart(self.retro, self.tracer, self.process_span, importing)
        self.recorder = record_while_starting(self)
        hook = self.sampler.snapshot()
        # a new process has used nothing at its creation; a forked child starts from the parent's counters
        self.created = hook if info.create_source == "fork" else Snapshot(info.create_ns, 0, 0, None)
        self.segments.parent = self.process_span
        self.segments.emit(sc.INTERPRETER_START_SPAN, info.create_ns, info.hook_ns, self.created, hook, later=importing)
        if segment is not None:
            self.segments.begin(segment, info.hook_ns, hook)

    def close_segment(self, at_ns: int, next_name: str | None = None) -> None:
        """End the open bootstrap segment at ``at_ns`` and optionally open the next one."""
        if self.retro is not None and not self.done:
            self.retro.install_due()
        self.segments.close(at_ns, next_name, more=not self.done)

    def finish(self, error: BaseException | None = None, outcome: str | None = None,
               end_ns: int | None = None) -> None:
        """This process's startup is over (ready, failed or exited): end and flush its spans (``end_ns``: when it
        was, where that is known after the fact: a launcher learns its last API server's ready point)."""
        if self._launcher is not None and end_ns is None and error is None:  # exiting: its API servers may be ready
            settled = self._launcher.settle()
            if settled is not None:
                end_ns, outcome = settled
        self.segments.emit_later()  # a start over before its imports were: its interpreter start, tagged
        with self._lock:
            if self.done or self.process_span is None:
                return
            self.done = True
        end_ns = min(end_ns or time.time_ns(), time.time_ns())
        failing = error is not None or outcome not in (None, "ready")
        outcome = outcome or ("failed" if error else "ready")
        if self.live is not None:
            self.live.stop(outcome)
        last = self.segments.open  # its span is made now, untagged: past done, our span processor leaves it alone
        self.close_segment(end_ns)
        if self.retro is not None:
            self.retro.finish(self.process_span, self.local_spans(), last, end_ns, self.info.kind)
        if self.info.root:
            self.facts = start_facts(self.facts, self.sampler)
        ready.close_process_span(self, end_ns, outcome, error)
        self.nudge.over()  # the batch processors' own schedule from now on
        delay_s = ready.export_delay(self.info, failing)  # failed or exiting: at once (hand-over: FAILURE_FLUSH_MS)
        printout = self.info.root and error is None and ready.summary_due(self)  # on the flush thread
        ready.flush(self, settings.seconds_from_ms(settings.FLUSH_MS), before=lambda: ready.publish(self),
                    then=ready.print_pending if printout else None,
                    handover_s=settings.seconds_from_ms(settings.FAILURE_FLUSH_MS) if failing else 0.0, delay_s=delay_s)
        if self.sampler is not None:
            self.sampler.stop_after(settings.seconds_from_ms(settings.SAMPLE_TAIL_MS), ready.flush_metrics)

    def await_frontends(self, count: int) -> None:
        """This process spawned ``count`` API servers: its start ends when the last is ready (export/frontends.py)."""
        if count <= 0 or self.process_span is None or self.done:
            return
        from vllm_otel_startup.agent.export.frontends import Frontends

        self.frontends, self._launcher = count, Frontends(self, count)
        self._launcher.watch()

    def fleet(self) -> dict[str, str]:
        """Fleet label values: the API server's own facts; a child's from the API server (at spawn)."""
        return process_fleet(self.info.root, self.facts, self.sampler)
