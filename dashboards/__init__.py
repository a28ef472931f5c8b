"""Fleet dashboards and alert rules for vllm-otel-startup, written as code.

Every metric and label name comes from the package's vocabulary (``vllm_otel_startup.semconv``); the generated
files — a monitoring mixin under ``mixin/`` (``dashboards_out/``, ``dashboards_v2_out/``, ``prometheus_rules.yaml``,
``prometheus_alerts.yaml``, the dashboards' kustomization) and the PrometheusRule — are written by
``python -m dashboards.generate`` and checked for drift in CI (``--check``). See dashboards/README.md.
"""
