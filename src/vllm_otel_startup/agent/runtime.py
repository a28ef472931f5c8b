"""Per-process startup state: the process span (the root in the API server), bootstrap segments, the resource sampler,
the ready point (metrics recorded, spans handed to the API server, bounded flush), failure, and the gap accounting."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export import ready
from vllm_otel_startup.agent.export.nudge import ExportCount, ExportNudge
from vllm_otel_startup.agent.foundation.patch_points import SEGMENT_SPANS, SPAN_PHASES
from vllm_otel_startup.agent.foundation.process import (
    API_SERVER,
    ENGINE_CORE,
    WORKER,
    ProcessInfo,
    child_rank,
    model_from_argv,
    process_index,
    redact_argv,
    scrub,
)
from vllm_otel_startup.agent.foundation.self_cost import MainThreadCost
from vllm_otel_startup.agent.foundation.versions import start_versions
from vllm_otel_startup.agent.resources.retro_spans import RetroSpans
from vllm_otel_startup.agent.resources.sampler import Sampler, Snapshot
from vllm_otel_startup.model.intervals import uncovered

_log = logging.getLogger("vllm_otel_startup")

FRONTEND_POLL_S = 0.05  # how often a launcher looks for its API servers' ready points in the spool
PROCESS_SPANS = {API_SERVER: sc.ROOT_SPAN, ENGINE_CORE: sc.ENGINE_CORE_PROCESS_SPAN, WORKER: sc.WORKER_PROCESS_SPAN}


def vllm_cache_root() -> str:
    """vLLM's cache root as vLLM resolves it (its own settings, not ours)."""
    root = os.environ.get("VLLM_CACHE_ROOT")
    if root:
        return os.path.expanduser(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "vllm")


def start_mode() -> str:
    """'warm' when vLLM's cache root already holds model-info or compile artifacts, else 'cold'."""
    root = vllm_cache_root()
    for sub in ("modelinfos", "torch_compile_cache"):
        try:
            with os.scandir(os.path.join(root, sub)) as it:
                if any(True for _ in it):
                    return "warm"
        except OSError:
            continue
    return "cold"


class Runtime:
    """What this process knows about its own start. One instance per process."""

    def __init__(self, info: ProcessInfo, tracer: trace.Tracer, provider: Any) -> None:
        self.info = info
        self.tracer = tracer
        self.provider = provider
        self.active = info.kind in PROCESS_SPANS
        self.done = False
        self.process_span: Span | None = None
        self.facts: dict[str, Any] = {}  # attributes for the process span, set at finish
        self.pending: dict[str, dict[str, Any]] = {}  # phase -> attributes for that phase's next span end
        self.local: list[tuple[int, int, str, int, int | None, str | None]] = []  # ended startup spans here:
        # (start, end, name, span id, parent span id, phase)
        self.ended: list[Any] = []  # the same spans (SDK ReadableSpan): metrics and the spool are made of them
        self.sampler: Sampler | None = None
        self.nudge = ExportNudge(provider)  # EXPORT_EACH_PHASE: exports a phase as soon as it ends
        self.exports = ExportCount().install(provider) if settings.flag(settings.DEBUG) else None  # self_cost.py
        self.retro: RetroSpans | None = None  # long garbage collections and imports inside phases, as spans
        self._no_span_resources = settings.off("span_resources")  # diagnostics (settings.OFF)
        self.recorder: Any = None  # otel_metrics.StartupRecorder, made at the ready point
        self.collector: Any = None  # prometheus.StartupCollector (API server)
        self.frontends = 0  # API server processes this launcher spawned (several API servers, data parallel)
        self._frontends_since = 0
        self._frontends_settled = False
        self.live: Any = None  # live.Live: the start in progress (series, progress message, status endpoint)
        self.cost = MainThreadCost()  # our span processor's time on vLLM's threads (self_cost.py)
        self._snaps: dict[int, Snapshot] = {}  # span id -> resource snapshot at its start
        self._segment_snap: Snapshot | None = None
        self._created: Snapshot | None = None  # the resource readings at process creation (or the fork)
        self.patch_applied = 0
        self.patch_native = 0
        self.patch_frameless = 0  # of the applied: traced by sys.monitoring, no wrapper (patching/frameless.py)
        self.native_phases: dict[str, str] = {}  # span name -> phase: vLLM's own spans under names we do not list
        # vLLM's span name -> a ready or guard row's effect, run as that span ends (patching/wrappers.at_native_end)
        self.native_effects: dict[str, Callable[[BaseException | None], None]] = {}
        self.patch_missing: list[str] = []
        self.patch_failed: list[str] = []
        self.last_error: BaseException | None = None
        self._segment: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._token: object | None = None

    def detach(self) -> None:
        """Leave the process span's context (uninstrument, tests); the process normally never does."""
        if self._token is not None:
            context.detach(self._token)
            self._token = None

    def stop(self) -> None:
        """Stop observing (``start()``'s pair; uninstrument): the span processor and sampler hook go inert, the
        export nudge and long-event watchers stop, the process span's context is left, the sampler thread ends."""
        self.active = False
        self.nudge.stop()
        if self.retro is not None:
            self.retro.uninstall()
        self.detach()
        if self.sampler is not None:
            if not self.sampler.stopping:
                self.sampler.stop_after(0)
            self.sampler.join(1.0)  # bounded: its last sample is taken within one tick

    def ended_spans(self) -> list[Any]:
        """This process's ended startup spans so far (a copy, taken under the runtime's lock)."""
        with self._lock:
            return list(self.ended)

    @property
    def open_segment(self) -> tuple[str, int] | None:
        """The open bootstrap segment (name, start ns): a span made when it closes."""
        return self._segment

    # ---- lifecycle ------------------------------------------------------------------------------------
    def after_fork_in_child(self) -> None:
        """A forked child inherits this process's state (hooks, provider, even our runtime) but runs no
        sitecustomize: become the EngineCore / worker the parent announced, or go quiet."""
        kind = settings.text(settings.CHILD_KIND)
        self._lock = threading.Lock()
        if self.live is not None:  # the parent's status socket and thread are not this process's
            self.live.forget_in_child()
            self.live = None
        if not self.active or kind not in (ENGINE_CORE, WORKER):
            self.active, self.done = False, True
            return
        now = time.time_ns()
        self.info = ProcessInfo(kind=kind, pid=os.getpid(), create_ns=now, create_source="fork", hook_ns=now,
                                argv=self.info.argv, rank=child_rank(kind))
        self.done = False
        self.facts, self.pending, self.local, self.ended = {}, {}, [], []
        self.patch_missing, self.last_error, self._segment, self._snaps = [], None, None, {}
        self.patch_failed = []
        self.start(segment=sc.PROCESS_ENTRY_SPAN)  # threads do not survive a fork: a new sampler too

    def start(self, segment: str = sc.IMPORTS_SPAN) -> None:
        info = self.info
        if info.root:
            parent = context.Context()  # a new trace per start
        else:
            tp = settings.text(settings.TRACEPARENT)
            parent = TraceContextTextMapPropagator().extract({"traceparent": tp}) if tp else context.Context()
        attrs: dict[str, Any] = {
            sc.PHASE: ("startup" if info.root else
                       {API_SERVER: "api_server_process", ENGINE_CORE: "engine_core_process",
                        WORKER: "worker_process"}[info.kind]),
            sc.PROCESS_KIND: info.kind,
            "process.pid": info.pid,
            "process.parent_pid": os.getppid(),
            sc.PROCESS_CREATE_TIME_SOURCE: info.create_source,
        }
        if info.rank is not None:
            attrs[sc.WORKER_RANK] = info.rank
        if info.root:
            attrs[sc.MODE] = self.facts[sc.MODE] = start_mode()
            self.facts[sc.MODEL] = model_from_argv(info.argv)  # the resolved config's value replaces it
        if settings.flag(settings.EXPORT_EACH_PHASE) and not settings.off("export_nudge"):
            self.nudge.start()  # opt-in: each phase's export at once (nudge.py)
        self._start_live()
        name = PROCESS_SPANS[info.kind] if info.root or info.kind != API_SERVER else sc.API_SERVER_PROCESS_SPAN
        self.process_span = self.tracer.start_span(name, context=parent, start_time=info.create_ns, attributes=attrs)
        # The whole process lives under its process span: vLLM's own spans (and ours) parent to it.
        if not settings.off("process_context"):  # diagnostics (settings.OFF)
            self._token = context.attach(trace.set_span_in_context(self.process_span))
        self.sampler = Sampler(host=info.root)
        self.sampler.start(importing=segment == sc.IMPORTS_SPAN)  # a tick a second until the segment ends
        if self.retro is not None:  # a forked child inherits the parent's watchers
            self.retro.uninstall()
            self.retro = None
        if not settings.off("watchers"):
            self.retro = RetroSpans(self.tracer, skip_span_id=self.process_span.get_span_context().span_id)
            self.retro.install(later=segment == sc.IMPORTS_SPAN)  # then with the first phase (close_segment)
        self._register_resource_metrics()
        hook = self.sampler.snapshot()
        # a new process has used nothing at its creation; a forked child starts from the parent's counters
        self._created = hook if info.create_source == "fork" else Snapshot(info.create_ns, 0, 0, None)
        self._emit(sc.INTERPRETER_START_SPAN, info.create_ns, info.hook_ns, self._created, hook)
        self._segment, self._segment_snap = (segment, info.hook_ns), hook

    def _start_live(self) -> None:
        interval = settings.seconds_from_ms(settings.LIVE_INTERVAL_MS)
        if interval <= 0:  # off: no in-progress series, no progress line, no status endpoint
            return
        from vllm_otel_startup.agent.live.progress import Live

        try:
            self.live = Live(self, interval)
            self.live.start()
        except Exception:  # noqa: BLE001 - the in-progress view is optional
            _log.debug("in-progress state unavailable", exc_info=True)

    def _emit(self, name: str, start_ns: int, end_ns: int, a: Snapshot | None = None,
              b: Snapshot | None = None) -> None:
        if end_ns <= start_ns or self.process_span is None:
            return
        attrs = self.sampler.summary(a, b) if (self.sampler and a and b) else None
        span = self.tracer.start_span(
            name, context=trace.set_span_in_context(self.process_span), start_time=start_ns, attributes=attrs
        )
        span.end(end_time=end_ns)

    def close_segment(self, at_ns: int, next_name: str | None = None) -> None:
        """End the open bootstrap segment at ``at_ns`` and optionally open the next one."""
        snap = None
        if self.sampler:
            self.sampler.full_rate()
            snap = self.sampler.snapshot()
        with self._lock:
            seg, self._segment = self._segment, ((next_name, at_ns) if next_name and not self.done else None)
            seg_snap, self._segment_snap = self._segment_snap, snap
        if self.retro is not None and not self.done:
            self.retro.install_due()
        if seg is not None:
            self._emit(seg[0], seg[1], at_ns, seg_snap, snap)

    def finish(self, error: BaseException | None = None, outcome: str | None = None,
               end_ns: int | None = None) -> None:
        """This process's startup is over (ready, failed or exited): end and flush its spans (``end_ns``: when it
        was, where that is known after the fact: a launcher learns its last API server's ready point)."""
        if self.frontends and end_ns is None and error is None:  # exiting: its API servers may all be ready
            settled = self._settle_frontends()
            if settled is not None:
                end_ns, outcome = settled
        with self._lock:
            if self.done or self.process_span is None:
                return
            self.done = True
        end_ns = min(end_ns or time.time_ns(), time.time_ns())
        if self.live is not None:
            self.live.stop(outcome or ("failed" if error else "ready"))
        last = self._segment  # its span is made now, untagged: past done, our span processor leaves it alone
        self.close_segment(end_ns)
        span = self.process_span
        if self.retro is not None:
            with self._lock:
                named = [(s, e) for s, e, name, *_ in self.local if name in SEGMENT_SPANS]
            if last is not None:
                named.append((last[1], end_ns))
            self.retro.uninstall(emit_loose_under=span, named=named,
                                 tags={sc.PHASE: SPAN_PHASES[sc.GC_SPAN], sc.PROCESS_KIND: self.info.kind})
        if self.info.root:
            self.facts = self._start_facts()
        elif self.info.kind in (API_SERVER, ENGINE_CORE):  # one of several: vLLM's index of it
            index = process_index()
            if index is not None:
                span.set_attribute(sc.API_SERVER_INDEX if self.info.kind == API_SERVER else sc.DP_RANK, index)
        span.set_attributes({k: v for k, v in self.facts.items() if v is not None})
        span.set_attribute(sc.COMMAND_ARGS, redact_argv(self.info.argv))
        if self.sampler is not None:
            span.set_attributes(self.sampler.summary(self._created, self.sampler.snapshot()))
            if self.info.root:
                span.set_attributes(self.sampler.host_summary())
        span.set_attribute(sc.OUTCOME, outcome or ("failed" if error else "ready"))
        span.set_attribute(sc.PATCH_APPLIED, self.patch_applied)
        span.set_attribute(sc.PATCH_NATIVE, self.patch_native)
        span.set_attribute(sc.PATCH_FRAMELESS, self.patch_frameless)
        if self.patch_missing:
            span.set_attribute(sc.PATCH_MISSING, sorted(set(self.patch_missing)))
        if self.patch_failed:
            span.set_attribute(sc.PATCH_FAILED, sorted(set(self.patch_failed)))
        unexplained, gap, after = self.gaps(getattr(span, "start_time", None) or self.info.create_ns, end_ns)  # type: ignore[attr-defined]
        span.set_attribute(sc.UNEXPLAINED_S, round(unexplained / 1e9, 4))
        span.set_attribute(sc.LARGEST_GAP_S, round(gap / 1e9, 4))
        if after:
            span.set_attribute(sc.LARGEST_GAP_AFTER, after)
        if error is not None:
            span.record_exception(error)
            span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, scrub(f"{type(error).__name__}: {error}")[:500]))
        span.end(end_time=end_ns)
        # a start that fails or exits waits for its export no longer than a ready point; only its local hand-over
        # (metrics recorded before the SDK shuts down at exit) may take up to FAILURE_FLUSH_MS
        failing = error is not None or outcome not in (None, "ready")
        ready.flush(self, settings.seconds_from_ms(settings.FLUSH_MS), before=lambda: ready.publish(self),
                    handover_s=settings.seconds_from_ms(settings.FAILURE_FLUSH_MS) if failing else 0.0)
        if self.info.root and error is None:
            ready.print_summary_later(self)
        if self.sampler is not None:
            self.sampler.stop_after(settings.seconds_from_ms(settings.SAMPLE_TAIL_MS), ready.flush_metrics)

    # ---- a launcher of several API servers --------------------------------------------------------------
    def await_frontends(self, count: int) -> None:
        """This process spawned ``count`` API server processes (``--api-server-count``, data parallel) and serves
        no HTTP itself: its start ends when the last of them accepts HTTP. Each spools its spans at its ready
        point; a thread of ours watches the spool (never the host's threads) and ends this start at the last one's
        ready time, failed if one of them failed. Until then a waiting span names what this process does."""
        if count <= 0 or self.process_span is None or self.done:
            return
        self.frontends, self._frontends_since = count, time.time_ns()
        threading.Thread(target=self._watch_frontends, daemon=True, name="vllm-otel-startup-frontends").start()

    def _watch_frontends(self) -> None:
        while not self.done:
            settled = self._settle_frontends()
            if settled is not None:
                end_ns, outcome = settled
                self.finish(outcome=outcome, end_ns=end_ns)
                return
            time.sleep(FRONTEND_POLL_S)

    def _settle_frontends(self) -> tuple[int, str | None] | None:
        """Once every API server has spooled its process span: the launcher's wait ended at the last one's ready
        point, and (that time, the outcome: None for ready, "failed" if one failed); None before that, and for
        every caller but the first (the watcher and the exit path may both get here)."""
        from vllm_otel_startup.agent.export import spool

        tid = self.trace_id()
        if spool.count(tid, spool.process_name(API_SERVER, "")) < self.frontends:
            return None
        done = [s for s in spool.read(tid) if s.attrs.get(sc.PHASE) == "api_server_process"]
        if len(done) < self.frontends:
            return None
        with self._lock:
            if self._frontends_settled or self.done:
                return None
            self._frontends_settled = True
        end = max(s.end for s in done)
        wait = self.tracer.start_span(sc.API_SERVERS_WAIT_SPAN, start_time=self._frontends_since,
                                      context=trace.set_span_in_context(self.process_span))
        wait.end(end_time=max(end, self._frontends_since))
        return end, ("failed" if any(s.attrs.get(sc.OUTCOME) != "ready" for s in done) else None)

    # ---- the ready point's products ---------------------------------------------------------------------
    def _start_facts(self) -> dict[str, Any]:
        """What the API server knows of the start: config facts, versions, device model."""
        facts = {**self.facts, **start_versions()}
        if self.sampler is not None and self.sampler.device_model:
            facts[sc.DEVICE_MODEL] = self.sampler.device_model
        return facts

    def fleet(self) -> dict[str, str]:
        """Fleet label values: the API server's own facts; a child's from the API server (at spawn)."""
        from vllm_otel_startup.agent.export.observations import fleet_labels

        if self.info.root:
            return fleet_labels(self._start_facts())
        try:
            labels = json.loads(settings.text(settings.LABELS) or "{}")
        except ValueError:
            labels = {}
        own = fleet_labels({**start_versions(), sc.DEVICE_MODEL: self.sampler.device_model if self.sampler else None})
        return {k: str(labels.get(k) or own[k]) for k in own}

    def trace_id(self) -> str:
        return f"{self.process_span.get_span_context().trace_id:032x}" if self.process_span else ""

    def _register_resource_metrics(self) -> None:
        from opentelemetry import metrics

        from vllm_otel_startup.agent.export.otel_metrics import (
            StartupRecorder,
            meter,
            register_live_instruments,
            register_resource_instruments,
        )

        try:
            provider = metrics.get_meter_provider()
            if not hasattr(provider, "force_flush"):  # no SDK: nothing to record into
                return
            m = meter(provider)
            self.recorder = StartupRecorder(m)
            register_resource_instruments(m, self.sampler)
            if self.live is not None:
                register_live_instruments(m, self.live)
        except Exception:  # noqa: BLE001
            _log.debug("metrics unavailable", exc_info=True)
            return
        interval = settings.seconds_from_ms(settings.METRICS_FLUSH_MS)
        if interval > 0 and not self.sampler.stopped:
            threading.Thread(target=self._export_while_starting, args=(interval,), daemon=True,
                             name="vllm-otel-startup-metrics").start()

    def _export_while_starting(self, interval: float) -> None:
        """The resource series at a useful resolution while starting, without changing the SDK's interval
        for the rest of the process's life (on its own thread: a slow collector never delays sampling)."""
        sampler = self.sampler
        while sampler is not None and not sampler.stopped:
            time.sleep(interval)
            if not sampler.stopped and not self.done:
                try:
                    ready.flush_metrics()
                except Exception:  # noqa: BLE001
                    _log.debug("metrics export failed", exc_info=True)

    # ---- accounting -------------------------------------------------------------------------------------
    def record_local(self, span: Any, interval: bool = True) -> None:
        """Keep an ended startup span; ``interval``: it also counts for this process span's gap accounting."""
        with self._lock:
            if interval:
                parent = span.parent.span_id if span.parent is not None else None
                self.local.append((span.start_time, span.end_time, span.name, span.context.span_id, parent,
                                   (span.attributes or {}).get(sc.PHASE)))
            self.ended.append(span)

    def resource_begin(self, span_id: int) -> None:
        if self.sampler is not None and not self._no_span_resources:
            snap = self.sampler.snapshot()
            with self._lock:
                self._snaps[span_id] = snap

    def resource_end(self, span_id: int) -> dict[str, Any]:
        with self._lock:
            a = self._snaps.pop(span_id, None)
        return self.sampler.summary(a, self.sampler.snapshot()) if (a is not None and self.sampler) else {}

    def gaps(self, start_ns: int, end_ns: int) -> tuple[int, int, str | None]:
        """Time in [start, end] that no leaf span of this process covers (a parent's self time is not
        explained, a waiting span is: it names what this process does); the largest such gap; the span
        before it."""
        with self._lock:
            spans = list(self.local)
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
