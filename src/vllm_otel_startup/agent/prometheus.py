"""The startup metrics on vLLM's own ``GET /metrics``: a prometheus-client collector in the API server that
serves the whole start (its own spans plus what the EngineCore and workers spooled), derived exactly as
the OTLP path derives them (observations.py). Registered at the API server's ready point."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.observations import Obs, span_observations, start_observations
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
            spans = self.spans()
            observations = span_observations(spans, self.fleet) + start_observations(spans, self.fleet)
            yield from families(observations)
        except Exception:  # noqa: BLE001 - a scrape never fails because of us
            _log.debug("startup metrics collection failed", exc_info=True)


def families(observations: list[Obs]) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    grouped: dict[str, dict[tuple[tuple[str, str], ...], list[float]]] = {}
    for o in observations:
        key = tuple(sorted((sc.prom_label(k), v) for k, v in o.labels.items()))
        grouped.setdefault(o.metric, {}).setdefault(key, []).append(o.value)
    for metric, series in grouped.items():
        kind, _, _, desc = sc.STARTUP_METRICS[metric]
        name = sc.prom_name(metric)
        labels = [k for k, _ in next(iter(series))]
        if kind == "counter":
            fam = CounterMetricFamily(name, desc, labels=labels)
            for key, values in series.items():
                fam.add_metric([v for _, v in key], sum(values))
        else:
            fam = GaugeMetricFamily(name, desc, labels=labels)
            for key, values in series.items():
                fam.add_metric([v for _, v in key], values[-1])
        yield fam


def register(collector: StartupCollector, registry: Any = None) -> bool:
    """Add the collector to ``registry``: prometheus-client's default one (what vLLM's /metrics serves), or one
    vLLM made for Prometheus multiprocess mode (PROMETHEUS_MULTIPROC_DIR: /metrics serves that one instead)."""
    try:
        from prometheus_client import REGISTRY

        (registry or REGISTRY).register(collector)
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
