"""Fleet dashboards and alert rules for vllm-otel-startup, written as code.

Every metric and label name comes from the package's vocabulary (``vllm_otel_startup.semconv``); the generated
files (``dashboards/json/*.json``, ``deploy/prometheus/vllm-startup-rules.yaml``, the PrometheusRule and the
dashboards' kustomization) are written by ``python -m dashboards.generate`` and checked for drift in CI
(``--check``). See dashboards/README.md.
"""
