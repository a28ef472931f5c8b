"""deploy/kubernetes/components/vllm-otel-startup: a kustomize Component a team lists in its own kustomization to
turn startup tracing on in ITS vLLM Deployment (one defined nowhere in this repository), built with the same
`kubectl kustomize` as the overlays; its example's output passes kubernetes-validate --strict in
test_deploy.py's build test (BUILDS holds examples/*), and what it adds is checked here."""

from __future__ import annotations

import os
import re

import fleet_tools
import yaml
from test_deploy import KUSTOMIZE, docs, env

from vllm_otel_startup import semconv as sc

COMPONENT = KUSTOMIZE / "components" / "vllm-otel-startup"
EXAMPLE = "examples/component-usage"
OPT_IN = "vllm-otel-startup/instrument"


def _kind(name: str, kind: str) -> list[dict]:
    return [d for d in docs(name) if d["kind"] == kind]


def _activation_env() -> dict[str, str]:
    """The activation variables tests/e2e/test_layouts.py starts vLLM with (read from the KServe runtime)."""
    runtime = yaml.safe_load((fleet_tools.REPO / "deploy/adoption/kserve-servingruntime.yaml").read_text())
    wanted = ("PYTHONPATH", "OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR")
    return {e["name"]: e["value"] for e in runtime["spec"]["containers"][0]["env"] if e["name"] in wanted}


def test_it_is_a_kustomize_component_targeting_opted_in_deployments():
    k = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert (k["apiVersion"], k["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert [p["target"] for p in k["patches"]] == [{"kind": "Deployment", "labelSelector": f"{OPT_IN}=true"}]
    team = yaml.safe_load((KUSTOMIZE / EXAMPLE / "kustomization.yaml").read_text())
    assert team["components"] == ["../../components/vllm-otel-startup"]
    [own] = [d for d in yaml.safe_load_all((KUSTOMIZE / EXAMPLE / "deployment.yaml").read_text()) if d]
    assert own["metadata"]["labels"][OPT_IN] == "true" and "OTEL_PYTHON_DISTRO" not in str(own)
    ours = {d["metadata"]["name"] for d in docs("base") if d["kind"] == "Deployment"}
    assert own["metadata"]["name"] not in ours  # the team's Deployment, not one of this repository's


def test_the_teams_deployment_gets_the_activation_export_and_k8s_env():
    [dep] = _kind(EXAMPLE, "Deployment")
    [c] = dep["spec"]["template"]["spec"]["containers"]
    e = env(c)
    assert list(e)[0] == "HF_TOKEN" and c["command"] == ["vllm", "serve"]  # the team's env and command kept
    assert {k: e[k].get("value") for k in _activation_env()} == _activation_env()
    assert c["image"].startswith("registry.example.com/ml/vllm-openai-otel:")  # ours: the package baked in
    assert {e[k]["value"] for k in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")} == {"otlp"}
    assert e["OTEL_EXPORTER_OTLP_PROTOCOL"]["value"] == "http/protobuf"
    for attribute in ("k8s.pod.name", "k8s.pod.uid", "k8s.namespace.name", "k8s.node.name", "k8s.cluster.name"):
        assert sc.K8S_ENV[attribute][0] in e, attribute
    assert e["K8S_POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    [cm] = _kind(EXAMPLE, "ConfigMap")
    for name, value in (("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability:4318"),
                        ("OTEL_SERVICE_NAME", "chat-llm"), ("K8S_CLUSTER_NAME", "prod-eu-1")):
        ref = e[name]["valueFrom"]["configMapKeyRef"]
        assert ref["name"] == cm["metadata"]["name"] and cm["data"][ref["key"]] == value  # the team's settings
    assert re.fullmatch(r"vllm-otel-startup-[a-z0-9]{10}", cm["metadata"]["name"])  # a change rolls the pods


def test_the_pod_monitor_scrapes_the_teams_pods_with_the_otlp_label_names():
    [dep] = _kind(EXAMPLE, "Deployment")
    [monitor] = _kind(EXAMPLE, "PodMonitor")
    assert monitor["metadata"]["namespace"] == dep["metadata"]["namespace"] == "team-chat"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    ports = {p["name"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics/"
    [base_endpoint] = [d for d in docs("base") if d["kind"] == "PodMonitor"][0]["spec"]["podMetricsEndpoints"]
    assert [r.get("targetLabel") for r in endpoint["relabelings"]] == [
        r.get("targetLabel") for r in base_endpoint["relabelings"]]
    cluster = {r["targetLabel"]: r.get("replacement") for r in endpoint["relabelings"]}["k8s_cluster_name"]
    [cm] = _kind(EXAMPLE, "ConfigMap")
    assert cluster == cm["data"]["K8S_CLUSTER_NAME"]
    [drop] = endpoint["metricRelabelings"]  # OTLP carries the startup metrics: the scrape drops them
    assert drop["action"] == "drop" and all(re.fullmatch(drop["regex"], sc.prom_name(m)) for m in sc.STARTUP_METRICS)
    assert not any(k.startswith("prometheus.io/") for k in dep["spec"]["template"]["metadata"].get("annotations", {}))


def _build(tmp_path, deployments: list[dict]):
    (tmp_path / "deployments.yaml").write_text(yaml.safe_dump_all(deployments))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["deployments.yaml"], "components": [os.path.relpath(COMPONENT, tmp_path)]}))
    return fleet_tools.run(fleet_tools.tool("kubectl"), "kustomize", str(tmp_path))


def _deployment(name: str, labels: dict[str, str], container: dict) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}}


def test_deployments_without_the_label_are_left_alone_and_a_missing_env_list_fails_the_build(tmp_path):
    plain = _deployment("other", {"app": "other"}, {"name": "x", "image": "x", "env": []})
    opted = _deployment("llm", {OPT_IN: "true"}, {"name": "vllm", "image": "v", "env": []})
    r = _build(tmp_path, [plain, opted])
    assert r.returncode == 0, r.stderr
    out = {d["metadata"]["name"]: d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "Deployment"}
    assert out["other"] == plain
    assert "OTEL_PYTHON_DISTRO" in env(out["llm"]["spec"]["template"]["spec"]["containers"][0])
    no_env = _deployment("llm", {OPT_IN: "true"}, {"name": "vllm", "image": "v"})
    r = _build(tmp_path, [no_env])
    assert r.returncode != 0 and "env" in r.stderr  # loud at build time, never a silently uninstrumented pod
