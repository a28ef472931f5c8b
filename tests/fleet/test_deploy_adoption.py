"""deploy/adoption: the pieces for charts and runtimes teams already run, checked against what those projects read.

The vLLM production-stack values are read by the chart vllm/vllm-stack (github.com/vllm-project/production-stack,
helm/, checked at a6c01db): ``helm/templates/servicemonitor-engine.yaml`` renders
``servingEngineSpec.serviceMonitor.{metricRelabelings, relabelings}`` with toYaml into the engine ServiceMonitor's
``spec.endpoints[0]`` (Prometheus Operator RelabelConfig: camelCase keys), and
``helm/templates/deployment-vllm-multi.yaml`` renders ``modelSpec[].env`` with toYaml into the vLLM container.
No chart is rendered here (no Helm offline): these tests pin the values to those paths and keys."""

from __future__ import annotations

import re

import fleet_tools
import yaml
from test_deploy import IDENTITY, docs

from vllm_otel_startup import semconv as sc

ADOPTION = fleet_tools.REPO / "deploy" / "adoption"
# servingEngineSpec.serviceMonitor keys servicemonitor-engine.yaml reads
SERVICE_MONITOR_KEYS = {"enabled", "additionalLabels", "interval", "scrapeTimeout", "honorLabels",
                        "metricRelabelings", "relabelings"}
RELABEL_KEYS = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement", "action"}


def _values() -> dict:
    return yaml.safe_load((ADOPTION / "production-stack-values.yaml").read_text())


def test_the_charts_service_monitor_drops_its_copy_of_the_startup_metrics():
    """With OTLP on (the values export metrics over OTLP), the chart's own ServiceMonitor would store every start a
    second time under the chart's labels: its metricRelabelings drop every vllm_startup_* series, and nothing else
    (vLLM's serving metrics, vllm:*, stay)."""
    monitor = _values()["servingEngineSpec"]["serviceMonitor"]
    assert set(monitor) <= SERVICE_MONITOR_KEYS
    [drop] = monitor["metricRelabelings"]
    assert set(drop) <= RELABEL_KEYS and drop["action"] == "drop" and drop["sourceLabels"] == ["__name__"]
    assert all(re.fullmatch(drop["regex"], sc.prom_name(m)) for m in sc.STARTUP_METRICS)
    assert not re.fullmatch(drop["regex"], "vllm:num_requests_running")
    assert "enabled" not in monitor  # the team decides whether the chart creates it (Prometheus Operator CRDs)


def test_the_charts_service_monitor_gives_the_otlp_label_names_like_our_pod_monitor():
    monitor = _values()["servingEngineSpec"]["serviceMonitor"]
    assert all(set(r) <= RELABEL_KEYS for r in monitor["relabelings"])
    assert {r["targetLabel"] for r in monitor["relabelings"]} == IDENTITY
    [ours] = [d for d in docs("base") if d["kind"] == "PodMonitor"][0]["spec"]["podMetricsEndpoints"]
    assert monitor["relabelings"] == ours["relabelings"]


def test_the_chart_env_gives_the_k8s_resource_attributes():
    [model] = _values()["servingEngineSpec"]["modelSpec"]
    env = {e["name"]: e for e in model["env"]}
    for name, path in (("K8S_POD_NAME", "metadata.name"), ("K8S_POD_UID", "metadata.uid"),
                       ("K8S_NAMESPACE_NAME", "metadata.namespace"), ("K8S_NODE_NAME", "spec.nodeName")):
        assert env[name]["valueFrom"]["fieldRef"]["fieldPath"] == path
        assert name in {names[0] for names in sc.K8S_ENV.values()}
    assert "k8s.cluster.name=" in env["OTEL_RESOURCE_ATTRIBUTES"]["value"]


# --- KServe ---------------------------------------------------------------------------------------------------
# KServe (github.com/kserve/kserve, checked at aaac4e2): with no runtime named, an InferenceService gets the first
# of its namespace's ServingRuntimes, then of the ClusterServingRuntimes, whose supportedModelFormats entry for
# its format has autoSelect: true; `priority` orders only within each scope (GetSupportingRuntimes,
# pkg/apis/serving/v1beta1/predictor_model.go). A named runtime (spec.predictor.model.runtime) needs only the
# format listed, autoSelect or not (RuntimeSupportsModel). Both files passed the CRDs' openAPIV3Schema
# (charts/kserve-crd, unknown fields refused) when checked; the CRDs are not kept here: structure below.

def _kserve(name: str) -> dict:
    return yaml.safe_load((ADOPTION / name).read_text())


def test_the_kserve_runtime_never_takes_a_model_by_itself():
    """Auto-selected, a namespace ServingRuntime for `huggingface` would outrank KServe's built-in
    kserve-huggingfaceserver for every model of that format in the namespace whatever its priority: ours is
    chosen by name only, and carries no priority (KServe ignores one without autoSelect)."""
    runtime = _kserve("kserve-servingruntime.yaml")
    assert (runtime["apiVersion"], runtime["kind"]) == ("serving.kserve.io/v1alpha1", "ServingRuntime")
    formats = runtime["spec"]["supportedModelFormats"]
    assert formats and all(f["autoSelect"] is False and "priority" not in f for f in formats)
    [container] = runtime["spec"]["containers"]
    assert container["name"] == "kserve-container" and "--model" in container["args"]


def test_the_inference_service_names_the_runtime_and_adds_the_k8s_env():
    runtime, isvc = _kserve("kserve-servingruntime.yaml"), _kserve("kserve-inferenceservice.yaml")
    assert (isvc["apiVersion"], isvc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    assert set(model) <= {"runtime", "modelFormat", "storageUri", "env", "resources", "args"}
    env = {e["name"]: e for e in model["env"]}
    for name, path in (("K8S_POD_NAME", "metadata.name"), ("K8S_POD_UID", "metadata.uid"),
                       ("K8S_NAMESPACE_NAME", "metadata.namespace"), ("K8S_NODE_NAME", "spec.nodeName")):
        assert env[name]["valueFrom"]["fieldRef"]["fieldPath"] == path
    # KServe merges this env into the runtime's container by name: it must not undo the activation
    runtime_env = {e["name"] for e in runtime["spec"]["containers"][0]["env"]}
    assert not {"PYTHONPATH", "OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR"} & set(env)
    assert {"PYTHONPATH", "OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR"} <= runtime_env
