"""Everything that runs inside vLLM processes: the patch table and its hooks, the per-process runtime, span
processing and adoption of vLLM's spans, cause probes, process identity, the resource sampler and GPU readings,
exporters (file, OTLP metrics, vLLM's /metrics, the spool), the distro and OTEL_* repair."""
