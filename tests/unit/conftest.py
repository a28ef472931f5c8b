from __future__ import annotations

import os
import time

import fake_vllm
import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from support.kept_batches import kept_batches_exporter
from vllm_otel_startup import VllmStartupInstrumentor
from vllm_otel_startup.agent.foundation.process import ProcessInfo
from vllm_otel_startup.agent.patching.hooks import Installer
from vllm_otel_startup.agent.runtime import Runtime


@pytest.fixture
def otel():
    """A fresh global SDK TracerProvider with an in-memory exporter (vLLM's spans use the global one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_api._TRACER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001 - test isolation, as contrib tests do
    trace_api._TRACER_PROVIDER = None  # noqa: SLF001
    trace_api.set_tracer_provider(provider)
    yield provider, exporter
    trace_api._TRACER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001
    trace_api._TRACER_PROVIDER = None  # noqa: SLF001


@pytest.fixture
def metrics_reader():
    """A fresh global SDK MeterProvider read by an in-memory reader (our runtime records into the global one).
    ``reader.exported`` also keeps every batch a flush exported, as an OTLP exporter would have sent it
    (exemplars are reported once, by the collection that follows the measurement)."""
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader

    reader = InMemoryMetricReader()
    keep = kept_batches_exporter()
    reader.exported = keep.batches
    provider = MeterProvider(metric_readers=[reader, PeriodicExportingMetricReader(keep, 3_600_000)])
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001 - test isolation
    metrics_internal._METER_PROVIDER = None  # noqa: SLF001
    metrics_internal.set_meter_provider(provider)
    yield reader
    provider.shutdown()
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001
    metrics_internal._METER_PROVIDER = None  # noqa: SLF001


class Started:
    def __init__(self, rt: Runtime, installer: Installer, exporter: InMemorySpanExporter) -> None:
        self.rt, self.installer, self.exporter = rt, installer, exporter

    def spans(self, name: str | None = None):
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]


@pytest.fixture
def start(otel, tmp_path, monkeypatch):
    """start(kind, version, drop=...) -> Started: ``VllmStartupInstrumentor().instrument()`` in a process of
    that kind, and a fake vLLM of that release importable (imports happen in the test, after the hooks);
    ``uninstrument()`` afterwards."""
    provider, exporter = otel
    instrumentor = VllmStartupInstrumentor()

    def _start(kind: str = "api_server", version: str = "0.33.0", drop: frozenset = frozenset()) -> Started:
        root = fake_vllm.write_tree(tmp_path / f"fake-{version}", version, set(drop))
        fake_vllm.purge()
        monkeypatch.syspath_prepend(str(root))
        now = time.time_ns()
        info = ProcessInfo(kind=kind, pid=os.getpid(), create_ns=now - 50_000_000, create_source="proc",
                           hook_ns=now, argv=["vllm", "serve", "m"])
        monkeypatch.setattr(ProcessInfo, "current", classmethod(lambda cls: info))  # this process is that kind
        instrumentor.instrument(tracer_provider=provider, skip_dep_check=True)
        rt, installer = VllmStartupInstrumentor._runtime, VllmStartupInstrumentor._installer
        assert rt is not None and rt.info is info, "instrument() did not set up"
        return Started(rt, installer, exporter)

    yield _start
    instrumentor.uninstrument()
    fake_vllm.purge()
