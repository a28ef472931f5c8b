"""The ready point's work: what a process publishes when its startup ends (startup metrics recorded; a child's
spans spooled for the API server; in the API server the whole start on vLLM's /metrics and the printout), and
the bounded flush that exports it without holding the ready point for more than a few milliseconds. All of it runs on
one thread (each thread of ours beside vLLM's main thread at its ready point makes that thread wait for the GIL:
docs/lab/overhead.md): the local work, the printout, then the export. The printout and the export can wait
``READY_EXPORT_DELAY_MS`` (off by default): right after its ready point a process's main thread serves its first
requests. A process that exits before then exports at its exit (the SDK's shutdown) and prints its breakdown there; a
forked child exports at once (export_delay).

Everything here runs on the flush thread, off the ready path, and never raises into the host. A failure of
ours here (publish, printout) costs one warning per process (guard.READY); a failing export is the exporter's to
report (the SDK logs it) and stays at DEBUG here.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from opentelemetry.trace import Status, StatusCode

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export.nudge import flush_each
from vllm_otel_startup.agent.foundation import threads
from vllm_otel_startup.agent.foundation.guard import READY, failed, safe
from vllm_otel_startup.agent.foundation.process import (
    API_SERVER,
    ENGINE_CORE,
    ProcessInfo,
    process_index,
    redact_argv,
    scrub,
)

_log = logging.getLogger("vllm_otel_startup")
_EXITING = threading.Event()  # set at exit: ready-point work still waiting its delay is done there, or by the SDK
_UNPRINTED: list[Any] = []  # the runtime whose breakdown waits its delay (printed at exit if it comes first)
_PRINT_LOCK = threading.Lock()


def _at_exit() -> None:
    """At exit: a delayed export is left to the SDK's shutdown (this hook is registered after the SDK's where the
    providers exist before the agent, and runs first; in the other order the export has gone already), and a
    delayed breakdown is printed here."""
    _EXITING.set()
    print_pending()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):  # a child forked while a breakdown waits: the parent's, never printed there
    os.register_at_fork(after_in_child=_UNPRINTED.clear)


class ReadyHost(Protocol):
    """What the ready point's work needs of the process's runtime (runtime.Runtime provides it)."""

    info: ProcessInfo
    frontends: int  # API server processes this launcher spawned
    recorder: Any  # otel_metrics.StartupRecorder, or None without a meter provider
    collector: Any  # prometheus.StartupCollector once registered (API server)
    whole: list[Any] | None  # the root: the whole start's spans as publish read them (the printout reuses them)
    provider: Any  # the tracer provider (its force_flush)
    cost: Any  # self_cost.MainThreadCost
    retro: Any  # retro_spans.RetroSpans, or None
    nudge: Any  # export/nudge.ExportNudge (its exports woken by a phase's end)
    exports: Any  # export/nudge.ExportCount (DEBUG), or None

    def ended_spans(self) -> list[Any]: ...

    def trace_id(self) -> str: ...

    def fleet(self) -> dict[str, str]: ...


class ClosingHost(Protocol):
    """What closing the process span reads of the process's runtime (runtime.Runtime provides it)."""

    info: ProcessInfo
    process_span: Any
    facts: dict[str, Any]  # attributes for the process span
    sampler: Any  # resources.Sampler, or None
    created: Any  # resources.Snapshot: the readings at process creation (or the fork)
    patch_applied: int
    patch_native: int
    patch_frameless: int
    patch_missing: list[str]
    patch_failed: list[str]

    def gaps(self, start_ns: int, end_ns: int) -> tuple[int, int, str | None]: ...


def close_process_span(rt: ClosingHost, end_ns: int, outcome: str, error: BaseException | None) -> None:
    """The process span's closing attributes (facts, command line, resource use, outcome, patch counts, the gap
    accounting, the error), and its end at ``end_ns``."""
    span, info = rt.process_span, rt.info
    if not info.root and info.kind in (API_SERVER, ENGINE_CORE):  # one of several: vLLM's index of it
        index = process_index()
        if index is not None:
            span.set_attribute(sc.API_SERVER_INDEX if info.kind == API_SERVER else sc.DP_RANK, index)
    span.set_attributes({k: v for k, v in rt.facts.items() if v is not None})
    span.set_attribute(sc.COMMAND_ARGS, redact_argv(info.argv))
    if rt.sampler is not None:
        span.set_attributes(rt.sampler.summary(rt.created, rt.sampler.snapshot()))
        if info.root:
            span.set_attributes(rt.sampler.host_summary())
    span.set_attribute(sc.OUTCOME, outcome)
    span.set_attribute(sc.PATCH_APPLIED, rt.patch_applied)
    span.set_attribute(sc.PATCH_NATIVE, rt.patch_native)
    span.set_attribute(sc.PATCH_FRAMELESS, rt.patch_frameless)
    if rt.patch_missing:
        span.set_attribute(sc.PATCH_MISSING, sorted(set(rt.patch_missing)))
    if rt.patch_failed:
        span.set_attribute(sc.PATCH_FAILED, sorted(set(rt.patch_failed)))
    unexplained, gap, after = rt.gaps(getattr(span, "start_time", None) or info.create_ns, end_ns)
    span.set_attribute(sc.UNEXPLAINED_S, round(unexplained / 1e9, 4))
    span.set_attribute(sc.LARGEST_GAP_S, round(gap / 1e9, 4))
    if after:
        span.set_attribute(sc.LARGEST_GAP_AFTER, after)
    if error is not None:
        span.record_exception(error)
        span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, scrub(f"{type(error).__name__}: {error}")[:500]))
    span.end(end_time=end_ns)


def publish(rt: ReadyHost) -> None:
    """Record this process's startup metrics; a child spools its spans for the root, every API server serves the
    whole start on vLLM's /metrics. The parts are independent: one that fails loses only itself."""
    from vllm_otel_startup.agent.export import spool
    from vllm_otel_startup.model.spanmodel import from_readable

    ended = rt.ended_spans()
    own = [from_readable(s) for s in ended]
    trace_id = rt.trace_id()
    rt.whole = None
    if not rt.info.root or rt.frontends:  # a launcher's spans: for its API servers' /metrics
        safe(READY, spool.write, trace_id, spool_name(rt), ended)
    labels = safe(READY, rt.fleet)  # every series carries them: without them, no series
    if labels is None:
        return
    if rt.info.kind == API_SERVER:  # each of several API servers serves the whole start on its /metrics
        safe(READY, serve_on_vllm_metrics, rt, own, trace_id, labels)
    # the root's view of the whole start (its own spans and every other process's), read once
    whole = own + (safe(READY, spool.read, trace_id, spool_name(rt), default=[]) if rt.info.root else [])
    if rt.info.root:
        rt.whole = whole  # the printout's too: the children's spool read and parsed once at the ready point
    if rt.info.root and os.environ.get(MULTIPROC_DIR):
        safe(READY, _write_multiprocess, whole, labels)
    if rt.recorder is not None:
        safe(READY, _record_metrics, rt, own, whole, labels)


MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


def _write_multiprocess(whole: list[Any], labels: dict[str, str]) -> None:
    """Prometheus multiprocess mode (PROMETHEUS_MULTIPROC_DIR: set by vLLM's Helm chart, and by vLLM itself with
    several API servers): /metrics serves only what the processes wrote into that directory, so the root writes the
    whole start there once, and every API server's /metrics serves it once."""
    from vllm_otel_startup.agent.export import prometheus
    from vllm_otel_startup.agent.export.observations import whole_start_observations

    prometheus.write_multiprocess(whole_start_observations(whole, labels), os.environ[MULTIPROC_DIR])


def _record_metrics(rt: ReadyHost, own: list[Any], whole: list[Any], labels: dict[str, str]) -> None:
    """Over OTLP: this process's own phases; the root also the whole start (``whole``)."""
    from vllm_otel_startup.agent.export.observations import span_observations, start_observations

    observations = span_observations(own, labels)
    if rt.info.root:
        observations += start_observations(whole, labels)
    rt.recorder.record(observations)


def summary_due(rt: ReadyHost) -> bool:
    """The root's ready point: its compact breakdown is due in the server's log (OTEL_PYTHON_VLLM_STARTUP_SUMMARY=0:
    off, False). The flush thread prints it (print_pending) after the ready point's local work and before the export,
    ``READY_EXPORT_DELAY_MS`` after the ready point if set; at exit if that comes first. No thread of its own: each
    thread started at the ready point takes the GIL beside vLLM's main thread."""
    if not settings.flag(settings.SUMMARY):
        return False
    with _PRINT_LOCK:
        _UNPRINTED.append(rt)
    return True


def print_pending() -> None:
    """Print the breakdowns due and not printed yet (each once: the flush thread or the exit, whichever comes first)."""
    with _PRINT_LOCK:
        pending = list(_UNPRINTED)
        _UNPRINTED.clear()
    for rt in pending:
        print_summary(rt)


def print_summary(rt: ReadyHost) -> None:
    from vllm_otel_startup.agent.export import spool
    from vllm_otel_startup.model import summary
    from vllm_otel_startup.model.redact import scrub
    from vllm_otel_startup.model.spanmodel import from_readable

    try:
        if summary.enabled():
            spans = rt.whole  # as publish read them, or (publish failed) read here
            if spans is None:
                spans = [from_readable(s) for s in rt.ended_spans()] + spool.read(rt.trace_id(), skip=spool_name(rt))
            threads.say(scrub(summary.render(spans)))
    except Exception:  # noqa: BLE001 - telemetry never raises into the host
        failed(READY, "the printed breakdown")


def serve_on_vllm_metrics(rt: ReadyHost, own: list[Any], trace_id: str, labels: dict[str, str]) -> None:
    """Register the start's collector with vLLM's /metrics registry (once per process)."""
    from vllm_otel_startup.agent.export import prometheus, spool

    if rt.collector is not None:
        return
    name = spool_name(rt)
    rt.collector = prometheus.StartupCollector(lambda: own + spool.read(trace_id, skip=name), labels)
    prometheus.register(rt.collector)
    if rt.info.root:  # the start's spool is the root's to clean up
        spool.prune()
        atexit.register(spool.remove, trace_id)


def spool_name(rt: ReadyHost) -> str:
    """This process's name in the start's spool."""
    from vllm_otel_startup.agent.export import spool

    return spool.process_name(rt.info.kind, rt.info.pid)


def flush_metrics() -> None:
    from opentelemetry import metrics

    flush = getattr(metrics.get_meter_provider(), "force_flush", None)
    if flush is not None:
        flush(10_000)


def export_delay(info: ProcessInfo, failing: bool) -> float:
    """How long a process's export waits after its start ended: READY_EXPORT_DELAY_MS at a ready point; nothing for a
    start that fails or exits (the process is leaving), nor in a forked child (multiprocessing ends one with
    ``os._exit``: no exit hook, where an export still waiting would be lost)."""
    if failing or info.create_source == "fork":
        return 0.0
    return settings.seconds_from_ms(settings.READY_EXPORT_DELAY_MS)


def flush(rt: ReadyHost, wait_s: float, before: Callable[[], None] | None = None, handover_s: float = 0.0,
          delay_s: float = 0.0, then: Callable[[], None] | None = None) -> None:
    """Export what this process has, waiting at most ``wait_s``; the export goes on in the background.
    ``before`` runs first on the same thread (work that must not delay the ready point), ``then`` (the printout) after
    the delay and before the export (a collector never holds it up). ``delay_s`` (a ready point:
    READY_EXPORT_DELAY_MS): the wait is for ``before`` alone, and the export begins that long after it (at exit
    sooner: then the SDK's shutdown exports). ``handover_s`` (a start that fails or exits: the SDK shuts down next):
    first wait up to that long for ``before`` (local work, no network: metrics recorded, spans spooled), then
    ``wait_s`` for the export, as at a ready point."""
    debug = settings.flag(settings.DEBUG)
    handed_over = threading.Event()

    def run() -> None:
        t0 = time.monotonic()
        if before is not None:
            safe(READY, before)
        handed_over.set()
        if delay_s > 0 and _EXITING.wait(delay_s):
            return  # exiting: the SDK's shutdown, right after the exit hooks, exports what is queued
        if then is not None:
            safe(READY, then)
        try:
            flush_each(rt.provider, 30_000)  # each exporter on its own: a stuck collector never holds up the file
            flush_metrics()
        except Exception:  # noqa: BLE001 - an export that fails is the exporter's to report (the SDK logs it)
            _log.debug("flush failed", exc_info=True)
        if debug:
            from vllm_otel_startup.agent.foundation import self_cost, sysmon

            threads.say(f"[vllm-otel-startup] {rt.info.kind} pid {os.getpid()} flushed in "
                        f"{time.monotonic() - t0:.3f}s", sys.stderr)
            threads.say(self_cost.line(rt.info.kind, rt.cost, rt.retro, sysmon.current(), rt.nudge, rt.exports,
                                        rt.sampler),
                        sys.stderr)

    t = threads.Thread(target=run, name="vllm-otel-startup-flush", daemon=True)
    t0 = time.monotonic()
    if not threads.start(t):  # interpreter shutdown: the local hand-over on this thread, the export with the
        if before is not None:  # SDK's own shutdown, which comes next
            safe(READY, before)
        if then is not None:
            safe(READY, then)
        _log.debug("flush at interpreter shutdown: local hand-over only")
        return
    started = time.monotonic() - t0
    if handover_s > 0:  # a failing start: its local hand-over first (capped), then the export's wait as at ready
        handed_over.wait(handover_s)
    # wait_s is the caller's whole budget, timed from outside (tests/e2e/ready_probe.py): the thread's start counts
    # (the GIL handed to the new thread and back), and twice that, at least two switch intervals, is kept for
    # getting the GIL back from busy threads when the join times out (a plain join(wait_s) overran its budget)
    budget = max(0.0, wait_s - started - 2 * max(started, sys.getswitchinterval()))
    if delay_s > 0:
        handed_over.wait(budget)  # the local hand-over; the export comes later
    else:
        t.join(budget)
    if debug:
        threads.say(f"[vllm-otel-startup] {rt.info.kind} pid {os.getpid()} ready-point wait "
                    f"{1e3 * (time.monotonic() - t0):.1f} ms (export {'running' if t.is_alive() else 'done'})",
                    sys.stderr)
