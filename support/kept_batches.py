"""A metric exporter that keeps what it exports: the unit tests' metrics fixture and the GPU probe read every batch
an OTLP exporter would have sent."""

from __future__ import annotations


def kept_batches_exporter():
    """A metric exporter that keeps every batch it is given, as an OTLP exporter would have sent it (exemplars
    are reported once, by the collection that follows the measurement)."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class KeptBatches(MetricExporter):
        def __init__(self) -> None:
            super().__init__()
            self.batches: list = []

        def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
            self.batches.append(metrics_data)
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
            return None

    return KeptBatches()
