"""agent/export/otel_metrics.py: the OTLP path of the startup metrics. Each observation is recorded into its
instrument (a counter adds, a gauge is set) with an exemplar pointing at the observed span; a metric that cannot be
recorded is skipped, the others go on. (Both paths report the same numbers: agent/export/test_observations.py.)"""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.observations import Obs
from vllm_otel_startup.agent.export.otel_metrics import StartupRecorder, meter

TRACE, SPAN = "ab" * 16, "cd" * 8


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics}


def _recorded(observations: list[Obs]) -> dict[str, list]:
    reader = InMemoryMetricReader()
    StartupRecorder(meter(MeterProvider(metric_readers=[reader]))).record(observations)
    return _points(reader)


def test_counters_add_gauges_are_set_and_each_carries_its_labels():
    points = _recorded([
        Obs("vllm.startup.starts", 1, {sc.OUTCOME: "ready"}),
        Obs("vllm.startup.starts", 1, {sc.OUTCOME: "ready"}),
        Obs("vllm.startup.phase.last_duration", 4.0, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"}),
        Obs("vllm.startup.phase.last_duration", 2.5, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"}),
    ])
    [starts] = points["vllm.startup.starts"]
    assert (starts.value, dict(starts.attributes)) == (2, {sc.OUTCOME: "ready"})
    [phase] = points["vllm.startup.phase.last_duration"]
    assert phase.value == 2.5  # the last one set


def test_the_exemplar_points_at_the_observed_span():
    points = _recorded([Obs("vllm.startup.cudagraphs", 67, {}, TRACE, SPAN)])
    [point] = points["vllm.startup.cudagraphs"]
    [ex] = point.exemplars
    assert (f"{ex.trace_id:032x}", f"{ex.span_id:016x}") == (TRACE, SPAN)


def test_a_metric_that_cannot_be_recorded_is_skipped_and_the_rest_recorded():
    points = _recorded([Obs("vllm.startup.no_such_metric", 1, {}),
                        Obs("vllm.startup.starts", 1, {sc.OUTCOME: "failed"})])
    assert set(points) == {"vllm.startup.starts"}


def test_the_meter_is_ours_by_name_and_version():
    from vllm_otel_startup.version import __version__

    m = meter(MeterProvider())
    assert (m._name, m._version) == (sc.INSTRUMENTATION_NAME, __version__)  # noqa: SLF001
