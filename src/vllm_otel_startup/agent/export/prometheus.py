"""The startup metrics on vLLM's own ``GET /metrics``: a prometheus-client collector in the API server that
serves the whole start (its own spans plus what the EngineCore and workers spooled), derived exactly as
the OTLP path derives them (observations.py). Registered at the API server's ready point."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.observations import Obs, whole_start_observations
from vllm_otel_startup.model.spanmodel import Span

_log = logging.getLogger("vllm_otel_startup")


class StartupCollector:
    """prometheus_client custom collector; ``spans()`` returns the whole start at scrape time."""

    def __init__(self, spans: Callable[[], list[Span]], fleet: dict[str, str]) -> None:
        self.spans = spans
        self.fleet = fleet

    def describe(self) -> list[Any]:  # no eager collect at registration time
        return []

    def collect(self) -> Iterator[Any]:
        try:
            yield from families(whole_start_observations(self.spans(), self.fleet))
        except Exception:  # noqa: BLE001 - a scrape never fails because of us
            _log.debug("startup metrics collection failed", exc_info=True)


def families(observations: list[Obs]) -> Iterator[Any]:
    """Counters carry the last observed span of their series as an exemplar (``trace_id``, ``span_id``: the
    OTLP path's exemplar): prometheus-client writes it when the scraper asks for OpenMetrics, as Prometheus does,
    and vLLM serves /metrics with prometheus-client's negotiating app; the plain text format leaves it out."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.samples import Exemplar

    grouped: dict[str, dict[tuple[tuple[str, str], ...], list[Obs]]] = {}
    for o in observations:
        key = tuple(sorted((sc.prom_label(k), v) for k, v in o.labels.items()))
        grouped.setdefault(o.metric, {}).setdefault(key, []).append(o)
    for metric, series in grouped.items():
        kind, _, _, desc = sc.STARTUP_METRICS[metric]
        name = sc.prom_name(metric)
        labels = [k for k, _ in next(iter(series))]
        if kind == "counter":
            fam = CounterMetricFamily(name, desc, labels=labels)
            for key, obs in series.items():
                fam.add_metric([v for _, v in key], sum(o.value for o in obs))
                seen = [o for o in obs if o.trace_id and o.span_id]
                if seen:
                    fam.samples[-1] = fam.samples[-1]._replace(exemplar=Exemplar(
                        {"trace_id": seen[-1].trace_id, "span_id": seen[-1].span_id}, seen[-1].value))
        else:
            fam = GaugeMetricFamily(name, desc, labels=labels)
            for key, obs in series.items():
                fam.add_metric([v for _, v in key], obs[-1].value)
        yield fam


def write_multiprocess(observations: list[Obs], directory: str) -> int:
    """Write ``observations`` into a Prometheus multiprocess directory the way prometheus-client's multiprocess values
    do (its mmap files), in files of our own (``counter_vllmstartup<pid>.db``, ``gauge_<mode>_vllmstartup<pid>.db``):
    vLLM's processes hold theirs open, and a second writer on one file would corrupt it. Gauges are merged by the most
    recent write (``max`` where this prometheus-client has no timestamps): one writer, the start's root. Returns the
    number of samples written.

    Through ``prometheus_client.mmap_dict`` (undocumented) because no public API writes multiprocess values into
    files of a chosen name: the documented route (metrics made while ``PROMETHEUS_MULTIPROC_DIR`` is set) writes
    the process's own pid files, and only to memory when prometheus-client was imported before the variable was
    set, an order vLLM's processes decide, with nothing public to tell. So the dependency is bounded to the releases
    this was checked on (0.17.1, 0.20.0: ``write_value`` gains its timestamp, 0.26.0)."""
    import inspect
    import os
    import time

    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    stamped = "timestamp" in inspect.signature(MmapedDict.write_value).parameters
    mode = "mostrecent" if stamped else "max"
    tag, now, files, written = f"vllmstartup{os.getpid()}", time.time(), {}, 0
    try:
        for fam in families(observations):
            name = f"counter_{tag}.db" if fam.type == "counter" else f"gauge_{mode}_{tag}.db"
            if name not in files:
                files[name] = MmapedDict(os.path.join(directory, name))
            for sample in fam.samples:
                if sample.name.endswith("_created"):
                    continue
                key = mmap_key(fam.name, sample.name, list(sample.labels), list(sample.labels.values()),
                               fam.documentation)
                if stamped:
                    files[name].write_value(key, sample.value, now)
                else:
                    files[name].write_value(key, sample.value)
                written += 1
    finally:
        for f in files.values():
            f.close()
    return written


def register(collector: StartupCollector) -> bool:
    """Add the collector to prometheus-client's default registry (the one vLLM's /metrics serves outside
    Prometheus multiprocess mode; in that mode see :func:`write_multiprocess`)."""
    try:
        from prometheus_client import REGISTRY

        REGISTRY.register(collector)
        return True
    except Exception:  # noqa: BLE001
        _log.debug("could not register the startup metrics collector", exc_info=True)
        return False


def unregister(collector: StartupCollector) -> None:
    try:
        from prometheus_client import REGISTRY

        REGISTRY.unregister(collector)
    except Exception:  # noqa: BLE001
        pass
