"""What leaves a process: the span processor, the local OTLP-JSON file and the cross-process spool, the startup
metrics (one derivation, two paths: OTLP and vLLM's /metrics), the export nudge."""
