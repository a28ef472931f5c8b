"""OpenTelemetry metrics: the startup observations recorded at a process's ready point (counters and gauges,
with exemplars pointing at the observed span), and the sampler's resource readings as observable instruments
that report from process start until the sampler stops (and exported at a useful resolution until then)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export.observations import Obs
from vllm_otel_startup.agent.resources.procfs import cgroup_throttled_s, io_bytes, rss_bytes
from vllm_otel_startup.agent.resources.sampler import Sampler
from vllm_otel_startup.version import __version__

_log = logging.getLogger("vllm_otel_startup")


def meter(provider: Any) -> Meter:
    return provider.get_meter(sc.INSTRUMENTATION_NAME, __version__)


class StartupRecorder:
    """Records observations into instruments created on first use (not on the interpreter-start path)."""

    def __init__(self, m: Meter) -> None:
        self.meter = m
        self._instruments: dict[str, Any] = {}

    def _instrument(self, name: str) -> Any:
        inst = self._instruments.get(name)
        if inst is None:
            kind, unit, _, desc = sc.STARTUP_METRICS[name]
            if kind == "counter":
                inst = self.meter.create_counter(name, unit=unit, description=desc)
            else:
                inst = self.meter.create_gauge(name, unit=unit, description=desc)
            self._instruments[name] = inst
        return inst

    def record(self, observations: Iterable[Obs]) -> None:
        for o in observations:
            try:
                inst = self._instrument(o.metric)
                ctx = _exemplar_context(o)
                kind = sc.STARTUP_METRICS[o.metric][0]
                if kind == "counter":
                    inst.add(o.value, o.labels, context=ctx)
                else:
                    inst.set(o.value, o.labels, context=ctx)
            except Exception:  # noqa: BLE001 - a metric that cannot be recorded is skipped
                _log.debug("could not record %s", o.metric, exc_info=True)


def _exemplar_context(o: Obs) -> Any:
    """A context whose current span is the observed one, so the SDK's trace-based exemplar filter keeps
    its trace and span id with the measurement."""
    if not o.trace_id or not o.span_id:
        return None
    sc_ = trace.SpanContext(int(o.trace_id, 16), int(o.span_id, 16), is_remote=False,
                            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(sc_))


def register_resource_instruments(m: Meter, sampler: Sampler | Callable[[], Sampler | None]) -> None:
    """Observable instruments over the sampler's readings; each reports nothing once the sampler stopped.
    ``sampler``: the sampler, or how to find the current one (a process with several starts has one per start)."""
    current: Callable[[], Sampler | None] = sampler if callable(sampler) else (lambda: sampler)
    first = current()
    if first is None:
        return

    def live(fn: Callable[[Sampler], list[Observation]]) -> Callable[[CallbackOptions], list[Observation]]:
        def callback(options: CallbackOptions) -> list[Observation]:
            s = current()
            if s is None or s.stopped:
                return []
            try:
                return fn(s)
            except Exception:  # noqa: BLE001 - a failed reading is an absent point, never an error
                return []
        return callback

    def cpu_time(s: Sampler) -> list[Observation]:
        t = os.times()
        return [Observation(t.user, {sc.CPU_MODE: "user"}), Observation(t.system, {sc.CPU_MODE: "system"})]

    def memory(s: Sampler) -> list[Observation]:
        rss = rss_bytes()
        return [Observation(rss)] if rss is not None else []

    def disk(s: Sampler) -> list[Observation]:
        io = io_bytes()
        return [Observation(io[0], {sc.DISK_IO_DIRECTION: "read"}),
                Observation(io[1], {sc.DISK_IO_DIRECTION: "write"})] if io else []

    def cores(s: Sampler) -> list[Observation]:
        return [Observation(v, {sc.CPU_SCOPE: k}) for k, v in s.take_peaks().items()]

    instruments: list[tuple[str, Callable[[Sampler], list[Observation]]]] = [
        ("process.cpu.time", cpu_time), ("process.memory.usage", memory), ("process.disk.io", disk),
        ("vllm.startup.cpu.cores", cores),
    ]
    if first.host:
        def throttled(s: Sampler) -> list[Observation]:
            now = cgroup_throttled_s()
            return [Observation(now - s.throttled0)] if now is not None and s.throttled0 is not None else []

        def gpu(key: str, extra: dict[str, str] | None = None) -> Callable[[Sampler], list[Observation]]:
            return lambda s: [Observation(r[key], {**ident, **(extra or {})}) for ident, r in s.gpu if key in r]

        def pcie(s: Sampler) -> list[Observation]:
            names = {ident["hw.id"]: ident for ident, _ in s.gpu}
            return [Observation(v, {**names.get(hw_id, {sc.HW_ID: hw_id}), sc.NETWORK_IO_DIRECTION: d})
                    for hw_id, (rx, tx) in s.pcie.items() for d, v in (("receive", rx), ("transmit", tx))]

        instruments += [
            ("vllm.startup.cgroup.cpu.throttled_time", throttled),
            ("hw.gpu.memory.usage", gpu("mem_used")), ("hw.gpu.memory.limit", gpu("mem_total")),
            ("hw.gpu.utilization", gpu("util", {sc.HW_GPU_TASK: "general"})),
            ("hw.power", gpu("power", {sc.HW_TYPE: "gpu"})), ("hw.gpu.io", pcie),
        ]
    makers = {"counter": m.create_observable_counter, "updowncounter": m.create_observable_up_down_counter,
              "gauge": m.create_observable_gauge}
    for name, fn in instruments:
        kind, unit, _, desc = sc.RESOURCE_METRICS[name]
        makers[kind](name, callbacks=[live(fn)], unit=unit, description=desc)


def register_live_instruments(m: Meter, live: Any) -> None:
    """The in-progress gauges (agent/live/progress.py): this process's own series, read at each export, none once the
    process is past its ready point (the series stop). ``live``: its state, or how to find the current one."""
    current = live if callable(live) else (lambda: live)

    def callback(name: str) -> Callable[[CallbackOptions], list[Observation]]:
        def read(options: CallbackOptions) -> list[Observation]:
            state = current()
            if state is None:
                return []
            try:
                return [Observation(value, labels) for metric, value, labels in state.own_series() if metric == name]
            except Exception:  # noqa: BLE001 - a failed reading is an absent point, never an error
                return []
        return read

    for name, (_kind, unit, _, desc) in sc.LIVE_METRICS.items():
        m.create_observable_gauge(name, callbacks=[callback(name)], unit=unit, description=desc)


def record_while_starting(host: Any) -> StartupRecorder | None:
    """This process's startup metrics, once its sampler runs (``host``: the runtime, with its ``sampler``, ``live``
    and ``done``): the resource and in-progress instruments, and their export at a useful resolution while starting;
    the recorder of the ready point's metrics, or None without an SDK meter provider."""
    from opentelemetry import metrics

    recorder = host.recorder  # a later start of this process: its instruments read the current sampler already
    if recorder is None:
        try:
            provider = metrics.get_meter_provider()
            if not hasattr(provider, "force_flush"):  # no SDK: nothing to record into
                return None
            m = meter(provider)
            recorder = StartupRecorder(m)
            register_resource_instruments(m, lambda: host.sampler)
            if host.live is not None:
                register_live_instruments(m, lambda: host.live)
        except Exception:  # noqa: BLE001
            _log.debug("metrics unavailable", exc_info=True)
            return recorder
    interval = settings.seconds_from_ms(settings.METRICS_FLUSH_MS)
    if interval > 0 and host.sampler is not None:  # on the sampler's thread: one wake-up for a tick and the export,
        # rare while the process works (an export beside its busy main thread makes that thread wait for the GIL)
        host.sampler.every(interval, lambda: _export_while_starting(host),
                           busy_s=settings.seconds_from_ms(settings.EXPORT_BUSY_MS))
    return recorder


def _export_while_starting(host: Any) -> None:
    """The resource series at a useful resolution while starting, without changing the SDK's interval for the rest
    of the process's life. A collector that answers slowly delays the sampler's next tick as long (at most the
    exporter's own timeout), never vLLM."""
    from vllm_otel_startup.agent.export.ready import flush_metrics

    if not host.done:
        try:
            flush_metrics()
        except Exception:  # noqa: BLE001
            _log.debug("metrics export failed", exc_info=True)
