"""When spans leave a starting process: rarely while it works, on the SDK's schedule while it waits, at once after each
phase with ``OTEL_PYTHON_VLLM_STARTUP_EXPORT_EACH_PHASE`` (off by default).

By default (:meth:`ExportNudge.start`) the batch processors export at most every ``EXPORT_BUSY_MS`` (30 s) while the
process works, on their own schedule (``OTEL_BSP_SCHEDULE_DELAY``, the SDK's 5 s) while a waiting phase is open in it
(its main thread idle on another process: an export there takes nothing from it), and from the start's end on
(:meth:`ExportNudge.over`, before the ready point's flush). An export is Python on the batch processor's thread: beside
a busy main thread each one makes that thread wait for the GIL (measured: docs/lab/overhead.md). The price: a process
SIGKILLed while it works loses what ended since its last export, up to ``EXPORT_BUSY_MS`` (docs/telemetry.md).

With ``EXPORT_EACH_PHASE``:

the SDK's batch span processor exports every ``OTEL_BSP_SCHEDULE_DELAY`` (500 ms with this switch unless set) or when
a full batch is queued (512 spans); a process killed inside that delay (SIGKILL, the OOM killer: nothing runs in it
afterwards) loses the phases that ended in it. With the switch, when a phase span ends, the span processor calls
:meth:`ExportNudge.notify`: one ``Event.set()`` per batch processor and nothing else on the thread that ends the span
(vLLM's). A thread of ours per batch processor wakes and flushes it, so each exporter starts as soon as the phase
ends, and a slow collector never holds up the local file (the batch processors' export lock keeps these threads from
racing the processors' own workers). Phases that end together make one export (the event is cleared before each
flush). Detail spans (compile regions, garbage collections, imports) do not wake them, nor do phases that come in
bursts (``semconv.BURST_PHASES``: a graph loaded from the compile cache each): they end inside a phase, and that
phase's end exports them too.

Why off by default: an export per phase is tens of exports a process, each Python holding the GIL beside vLLM's
busy main thread, so the start pays the export threads' CPU and its main threads wait for the GIL more often
(measured: docs/lab/overhead-gpu.md).

The export is Python and needs the GIL: while vLLM's main thread holds it in one long C call (a ``gc.collect()``
of the large heap left after loading weights) the export waits for it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from vllm_otel_startup import diagnostics, settings
from vllm_otel_startup.agent.foundation import threads

_log = logging.getLogger("vllm_otel_startup")


def _batch_processors(provider: Any) -> list[Any] | None:
    """The SDK provider's batch span processors; None when its processors cannot be listed."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # the SDK keeps them in a private tuple (1.x)
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", None)
    if not isinstance(processors, tuple):
        return None
    return [p for p in processors if isinstance(p, BatchSpanProcessor)]


def _flushes(provider: Any) -> list[Callable[..., Any]]:
    """One flush per batch span processor of the SDK provider (each exporter on its own); the provider's own flush
    (all of them in turn) when its processors cannot be listed."""
    processors = _batch_processors(provider)
    if processors is not None:
        return [p.force_flush for p in processors]
    flush = getattr(provider, "force_flush", None)
    return [flush] if flush is not None else []


def flush_each(provider: Any, timeout_ms: int) -> None:
    """The ready point's export, with as few threads as a stuck collector allows: the local file's batch processors
    first, on this thread (a local write: no collector ever holds it up); then, where several batch processors export
    elsewhere, each on a thread of its own (one stuck collector never holds up another); then the provider's own flush
    on this thread (every processor in turn; a single remote one exports there). Each thread started here takes the
    GIL beside the process's main thread at its ready point. While a process works its spans wait for this (the pace
    above), so they are all still queued."""
    try:
        processors = _batch_processors(provider) or []
    except Exception:  # noqa: BLE001 - not the SDK we know: the provider's flush alone
        processors = []
    remote = []
    for p in processors:
        if _local(p):
            p.force_flush(timeout_ms)
        else:
            remote.append(p)
    for i, p in enumerate(remote if len(remote) > 1 else ()):
        threads.start(threads.Thread(target=p.force_flush, args=(timeout_ms,), name=f"vllm-otel-startup-flush-{i}",
                                     daemon=True))
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(timeout_ms)


def _exporter_of(processor: Any) -> Any:
    """A batch span processor's exporter (the SDK's private ``_batch_processor._exporter``, >= 1.34), or None."""
    return getattr(getattr(processor, "_batch_processor", None), "_exporter", None)


def _local(processor: Any) -> bool:
    """Does this batch span processor export to our local file (a write on this host, never a collector)?"""
    from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter

    return isinstance(_exporter_of(processor) or getattr(processor, "span_exporter", None), StartupFileExporter)


class ExportCount:
    """How many exports the batch processors' exporters made, and of how many spans (``DEBUG`` only, for the
    self-cost line): the exporter instances' ``export`` counted (the SDK's private ``_batch_processor._exporter``;
    nothing counted where it is not there)."""

    def __init__(self) -> None:
        self.exports = self.spans = 0

    def install(self, provider: Any) -> ExportCount:
        try:
            for p in _batch_processors(provider) or []:
                exporter = _exporter_of(p)
                if exporter is not None:
                    exporter.export = self._counted(exporter.export)
        except Exception:  # noqa: BLE001 - a debug figure: nothing counted
            _log.debug("export count not installed", exc_info=True)
        return self

    def _counted(self, export: Callable[..., Any]) -> Callable[..., Any]:
        def counted(spans: Any, *args: Any, **kwargs: Any) -> Any:
            self.exports += 1
            self.spans += len(spans)
            return export(spans, *args, **kwargs)

        return counted


def _schedules(provider: Any) -> list[tuple[Any, float]]:
    """Each batch span processor's batching state (SDK >= 1.34: ``_batch_processor``) and its own schedule in
    seconds; none where the SDK is not laid out so (then its schedule is left as it is)."""
    out = []
    for p in _batch_processors(provider) or []:
        inner = getattr(p, "_batch_processor", None)
        delay = getattr(inner, "_schedule_delay", None)
        if isinstance(delay, (int, float)) and isinstance(getattr(inner, "_worker_awaken", None), threading.Event):
            out.append((inner, float(delay)))
    return out


class ExportNudge:
    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self._events: list[threading.Event] = []
        self._pid = 0
        self._stopped = False
        self.flushes = 0  # exports these threads started (self_cost.py)
        self._own: list[tuple[Any, float]] | None = None  # (batch processor, its own schedule s), read once
        self._busy_s = 0.0  # > 0 while this process's start slows its batch processors
        self._waiting = 0  # waiting phases open in this process

    def start(self) -> None:
        """This process starts (again in a forked child, which inherits no threads): with ``EXPORT_EACH_PHASE`` its
        export threads, else its batch processors slowed while it works."""
        if settings.flag(settings.EXPORT_EACH_PHASE) and not diagnostics.off("export_nudge"):
            self._start_threads()
        else:
            self._pace()

    def _pace(self) -> None:
        self._waiting, self._busy_s = 0, 0.0
        busy_s = settings.seconds_from_ms(settings.EXPORT_BUSY_MS)
        if busy_s <= 0:
            return
        if self._own is None:  # once: a forked child's or a later start's processors may be slowed already
            try:
                self._own = _schedules(self._provider)
            except Exception:  # noqa: BLE001 - no SDK, or not the one we know: its own schedule
                self._own = []
                _log.debug("export pace not set", exc_info=True)
        self._busy_s = busy_s
        self._set(busy=True)

    def _set(self, busy: bool) -> None:
        for inner, own in self._own or ():
            inner._schedule_delay = max(own, self._busy_s) if busy else own
            # its worker would wait out the delay it is in: woken, it exports nothing (fewer than a batch queued)
            # and waits the new one
            inner._worker_awaken.set()

    def waiting_changed(self, delta: int) -> None:
        """A waiting phase of this process began (+1) or ended (-1): the SDK's schedule while one is open."""
        if self._busy_s <= 0:
            return
        self._waiting = max(0, self._waiting + delta)  # never below: a wait opened in an earlier start may end
        if self._waiting == 1 and delta > 0:
            self._set(busy=False)
        elif self._waiting == 0:
            self._set(busy=True)

    def over(self) -> None:
        """This process's start is over (ready, failed, exiting): the SDK's own schedule from now on."""
        if self._busy_s > 0:
            self._busy_s = 0.0
            self._set(busy=False)

    def _start_threads(self) -> None:
        if self._pid == os.getpid():
            return
        self._pid, self._stopped = os.getpid(), False
        events = []
        try:
            flushes = _flushes(self._provider)
        except Exception:  # noqa: BLE001 - no SDK, or not the one we know: the batch processors' own schedule
            flushes = []
        for i, flush in enumerate(flushes):
            event = threading.Event()  # fresh ones: a lock of the parent's may have been held at the fork
            threads.Thread(target=self._run, args=(flush, event), name=f"vllm-otel-startup-export-{i}",
                           daemon=True).start()
            events.append(event)
        self._events = events

    def notify(self) -> None:
        """A phase has ended: wake the export threads (cheap, never waits for an export)."""
        for event in self._events:
            event.set()

    def stop(self) -> None:
        self._stopped = True
        self.notify()

    def _run(self, flush: Callable[..., Any], event: threading.Event) -> None:
        while True:
            event.wait()
            if self._stopped or self._pid != os.getpid():
                return
            event.clear()
            self.flushes += 1
            try:
                flush(30_000)
            except Exception:  # noqa: BLE001 - telemetry never raises into the host
                _log.debug("export after a phase failed", exc_info=True)
