"""deploy/: every kustomize overlay builds and passes kubernetes-validate --strict offline; the manifests say what
the issue asks (instrumented start, OTEL_* and downward-API env, persistent cache, probes, collector pipeline,
operator variant, recording and alert rules and dashboards from the mixin, mixin/); the scrape gives the OTLP
path's label names; every Prometheus config loads the mixin's two rules files; the local compose stack is a valid
Compose file."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import fleet_tools
import jsonschema
import pytest
import yaml

from dashboards import generate
from dashboards import vocabulary as v
from vllm_otel_startup import semconv as sc

KUSTOMIZE = fleet_tools.REPO / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUSTOMIZE / "overlays").iterdir() if (p / "kustomization.yaml").exists())
EXAMPLES = sorted(p.name for p in (KUSTOMIZE / "examples").iterdir() if (p / "kustomization.yaml").exists())
BUILDS = ["monitoring", "base", *(f"overlays/{o}" for o in OVERLAYS), *(f"examples/{e}" for e in EXAMPLES)]
COMPOSE = fleet_tools.REPO / "deploy" / "compose"
IDENTITY = {v.CLUSTER, v.NAMESPACE, v.POD, v.NODE}


@cache
def built(name: str) -> str:
    r = fleet_tools.run(fleet_tools.tool("kubectl"), "kustomize", str(KUSTOMIZE / name))
    assert r.returncode == 0, r.stderr
    return r.stdout


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(built(name)) if d]


def one(name: str, kind: str, obj: str) -> dict:
    (found,) = [d for d in docs(name) if d["kind"] == kind and d["metadata"]["name"] == obj]
    return found


def container(name: str, deployment: str = "vllm") -> dict:
    return one(name, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]


def env(c: dict) -> dict[str, dict]:
    return {e["name"]: e for e in c.get("env", [])}


def test_there_are_overlays_for_the_operator_span_metrics_and_a_concrete_deployment():
    assert {"example", "operator", "spanmetrics", "kube-prometheus-stack", "scrape-only"} <= set(OVERLAYS)


def test_the_monitoring_side_is_the_rules_dashboards_and_collector_config_without_a_workload():
    """deploy/kubernetes/monitoring, once per cluster (the base builds on it): the PrometheusRule, every dashboard
    ConfigMap and the collector configuration, and nothing that runs; the scrape comes with the workload (the
    base's PodMonitor, or the component's for a team's own vLLM)."""
    kinds = sorted({d["kind"] for d in docs("monitoring")})
    assert kinds == ["ConfigMap", "PrometheusRule"], kinds
    rule, in_base = one("monitoring", "PrometheusRule", "vllm-startup"), one("base", "PrometheusRule", "vllm-startup")
    assert "namespace" not in rule["metadata"] and in_base["metadata"].pop("namespace") == "vllm"  # yours to set
    assert rule == in_base
    maps = {d["metadata"]["name"] for d in docs("monitoring") if d["kind"] == "ConfigMap"}
    assert maps == {d["metadata"]["name"] for d in docs("base") if d["kind"] == "ConfigMap"}
    assert {f"grafana-dashboard-{p.stem}" for p in (fleet_tools.REPO / "mixin/dashboards_out").glob("*.json")} <= maps
    assert _collector_configmap("monitoring") in maps


def test_a_teams_mixin_configuration_sets_runbook_urls_and_budgets(tmp_path):
    """dashboards.generate --config: absolute runbook URLs and the team's thresholds, written elsewhere (--out); a bad
    file is one error line and exit 2."""
    conf = tmp_path / "team.yaml"
    conf.write_text("runbook_base: https://wiki.example.com/vllm/runbooks.md\n"
                    "budgets: {ready_s: 300, phase_s: {torch_compile: 120}, container: vllm-server}\n")
    assert generate.main(["--config", str(conf), "--out", str(tmp_path / "out")]) == 0
    rules = yaml.safe_load((tmp_path / "out/mixin/prometheus_alerts.yaml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert alerts and all(r["annotations"]["runbook_url"].startswith("https://wiki.example.com/vllm/runbooks.md#")
                          for r in alerts)
    text = (tmp_path / "out/mixin/prometheus_alerts.yaml").read_text()
    slow = next(r["expr"] for r in alerts if r["alert"] == "VllmStartupSlow")
    assert re.search(r">\s+300\s", slow), slow  # p95 time to ready over the team's 300 s
    assert 'label_replace(vector(120), "vllm_startup_phase", "torch_compile"' in text  # one phase's budget changed
    assert 'label_replace(vector(300), "vllm_startup_phase", "weights_load"' in text  # the others kept
    assert 'container="vllm-server"' in text
    default = (fleet_tools.REPO / "mixin/prometheus_alerts.yaml").read_text()
    assert 'container="vllm"' in default and "wiki.example.com" not in default  # the repository's files untouched
    rule = yaml.safe_load((tmp_path / "out" / generate.PROMETHEUS_RULE.relative_to(fleet_tools.REPO)).read_text())
    assert [g["name"] for g in rule["spec"]["groups"]][-len(rules["groups"]):] == [g["name"] for g in rules["groups"]]
    for bad in ("runbook_base: docs/runbooks.md\n", "budgets: {ready_s: soon}\n", "budget: {}\n"):
        conf.write_text(bad)
        assert generate.main(["--config", str(conf), "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("name", BUILDS)
def test_kustomize_builds_and_kubernetes_validate_strict_accepts_it(name, tmp_path):
    out = tmp_path / "manifests.yaml"
    out.write_text(built(name))
    r = fleet_tools.run(str(fleet_tools.VENV_BIN / "kubernetes-validate"), "-k", fleet_tools.KUBERNETES_VERSION,
                        "--strict", "--quiet", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    # Custom resources have no schema offline: they are checked by the tests below (rules by promtool).
    for line in (r.stdout + r.stderr).splitlines():
        if "Couldn't find schema" in line:
            assert re.search(r"kind (PodMonitor|PrometheusRule|Instrumentation) ", line), line


def _validate(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = fleet_tools.run(str(fleet_tools.VENV_BIN / "kubernetes-validate"), "-k", fleet_tools.KUBERNETES_VERSION,
                        "--strict", str(path))
    assert r.returncode == 1, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_kubernetes_validate_rejects_a_broken_manifest(tmp_path):
    wrong_type = one("base", "Deployment", "vllm")
    wrong_type["spec"]["replicas"] = "one"
    assert "'one' is not of type 'integer'" in _validate(tmp_path, wrong_type)
    typo = one("base", "Deployment", "vllm")
    typo["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["httpGett"] = {"path": "/health"}
    assert "httpGett" in _validate(tmp_path, typo)  # --strict: unknown fields are errors


def test_vllm_starts_under_opentelemetry_instrument_with_otlp_configuration():
    c = container("base")
    assert c["command"][:3] == ["opentelemetry-instrument", "vllm", "serve"]
    e = env(c)
    assert e["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"].startswith("http://otel-collector:4318")
    assert e["OTEL_TRACES_EXPORTER"]["value"] == e["OTEL_METRICS_EXPORTER"]["value"] == "otlp"
    assert e["OTEL_EXPORTER_OTLP_PROTOCOL"]["value"] == "http/protobuf"


def test_downward_api_env_gives_every_k8s_resource_attribute_the_distro_reads():
    e = env(container("base"))
    for attribute, names in sc.K8S_ENV.items():
        assert names[0] in e, f"{attribute}: set {names[0]}"
    for name, path in (("K8S_POD_NAME", "metadata.name"), ("K8S_POD_UID", "metadata.uid"),
                       ("K8S_NAMESPACE_NAME", "metadata.namespace"), ("K8S_NODE_NAME", "spec.nodeName")):
        assert e[name]["valueFrom"]["fieldRef"]["fieldPath"] == path


def test_vllm_cache_root_and_model_cache_live_on_a_persistent_volume():
    spec = one("base", "Deployment", "vllm")["spec"]["template"]["spec"]
    c = spec["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {x["name"]: x for x in spec["volumes"]}
    for var in ("VLLM_CACHE_ROOT", "HF_HOME"):
        path = env(c)[var]["value"]
        mount = next(m for m in mounts if path.startswith(m + "/"))
        claim = volumes[mounts[mount]]["persistentVolumeClaim"]["claimName"]
        assert one("base", "PersistentVolumeClaim", claim)


def test_probes_give_a_slow_start_time_and_gate_traffic_on_health():
    c = container("base")
    startup = c["startupProbe"]
    assert startup["httpGet"]["path"] == "/health" and startup["periodSeconds"] * startup["failureThreshold"] >= 1800
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "cpu" not in c["resources"].get("limits", {}), "a CPU limit throttles the CPU-bound start"


def test_collector_pipeline_sends_traces_to_tempo_and_metrics_to_prometheus():
    config = yaml.safe_load(one("base", "ConfigMap", _collector_configmap("base"))["data"]["config.yaml"])
    pipelines = config["service"]["pipelines"]
    assert pipelines["traces"]["receivers"] == pipelines["metrics"]["receivers"] == ["otlp"]
    assert "otlp/tempo" in pipelines["traces"]["exporters"]
    assert pipelines["metrics"]["exporters"] == ["prometheusremotewrite"]
    assert config["exporters"]["prometheusremotewrite"]["resource_to_telemetry_conversion"]["enabled"]
    for p in pipelines.values():
        assert "k8sattributes" in p["processors"] and p["processors"][-1] == "batch"
    _assert_components_defined(config)


def _collector_configmap(name: str) -> str:
    return next(d["metadata"]["name"] for d in docs(name) if d["kind"] == "ConfigMap"
                and d["metadata"]["name"].startswith("otel-collector-config"))


def _assert_components_defined(config: dict) -> None:
    for p in config["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for component in p.get(kind, []):
                assert component in config.get(kind, {}) or component in config.get("connectors", {}), component


def test_span_metrics_overlay_is_the_base_pipeline_plus_the_connector():
    base = yaml.safe_load((KUSTOMIZE / "monitoring/otel-collector-config.yaml").read_text())
    spans = yaml.safe_load((KUSTOMIZE / "overlays/spanmetrics/otel-collector-config.yaml").read_text())
    for section in ("extensions", "receivers", "processors", "exporters"):
        assert spans[section] == base[section]
    assert spans["service"]["pipelines"]["metrics"] == base["service"]["pipelines"]["metrics"]
    assert spans["service"]["pipelines"]["traces"]["exporters"] == ["otlp/tempo", "spanmetrics"]
    assert spans["service"]["pipelines"]["metrics/spanmetrics"]["receivers"] == ["spanmetrics"]
    connector = spans["connectors"]["spanmetrics"]
    assert [_seconds(b) for b in connector["histogram"]["explicit"]["buckets"]] == list(sc.DURATION_BUCKETS)
    assert connector["histogram"]["unit"] == "s"
    assert {d["name"] for d in connector["dimensions"]} <= {sc.PHASE, sc.PROCESS_KIND, sc.VLLM_VERSION, sc.MODEL}
    _assert_components_defined(spans)
    config = yaml.safe_load(one("overlays/spanmetrics", "ConfigMap", _collector_configmap("overlays/spanmetrics"))
                            ["data"]["config.yaml"])
    assert "spanmetrics" in config["connectors"]


def _seconds(duration: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(ms|s|m)", duration).groups()
    return float(value) * {"ms": 0.001, "s": 1, "m": 60}[unit]


def test_operator_variant_injects_the_agent_with_inject_python_and_our_image():
    """The Operator's injection proper: inject-python with an Instrumentation whose spec.python.image is built by
    deploy/operator-image from the pods' own vLLM image (same tag), our distro and configurator named in
    spec.python.env, and the stock vLLM image running plain `vllm serve`. (Its Instrumentation passed the Operator's
    CRD schema, strict, at opentelemetry-operator be89444 when checked; no CRD offline here: structure.)"""
    inst = one("overlays/operator", "Instrumentation", "vllm-startup")
    assert inst["apiVersion"] == "opentelemetry.io/v1alpha1"
    assert inst["spec"]["exporter"]["endpoint"] == "http://otel-collector:4318"
    assert {e["name"]: e["value"] for e in inst["spec"]["env"]}["OTEL_METRICS_EXPORTER"] == "otlp"
    python = inst["spec"]["python"]
    assert {e["name"]: e["value"] for e in python["env"]} == {
        "OTEL_PYTHON_DISTRO": "vllm_startup", "OTEL_PYTHON_CONFIGURATOR": "vllm_startup", "OTEL_LOGS_EXPORTER": "none"}
    pod = one("overlays/operator", "Deployment", "vllm")["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"instrumentation.opentelemetry.io/inject-python": "vllm-startup"}
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["vllm", "serve"]  # the sitecustomize on the Operator's PYTHONPATH starts the agent
    assert not [name for name in env(c) if name.startswith(("OTEL_", "K8S_")) or name == "PYTHONPATH"]
    image, tag = c["image"].rsplit(":", 1)
    assert image == "vllm/vllm-openai" and python["image"].endswith("-autoinstrumentation:" + tag)
    dockerfile = (fleet_tools.REPO / "deploy/operator-image/Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?$", dockerfile, re.M)
    assert stages[0] == ("${VLLM_IMAGE}", "build") and stages[-1][0].startswith("busybox")  # cp, for the Operator
    assert "COPY --from=build /autoinstrumentation /autoinstrumentation" in dockerfile
    from vllm_otel_startup.version import __version__  # the checkout's version, pinned and checked in the build

    assert re.search(rf"^ARG VLLM_OTEL_STARTUP_VERSION={re.escape(__version__)}$", dockerfile, re.M)
    script = (fleet_tools.REPO / "deploy/operator-image/autoinstrumentation.sh").read_text()
    assert "auto_instrumentation/sitecustomize.py" in script and "--target" in script


def test_rules_and_dashboards_in_the_build_are_the_generated_files():
    rule = one("base", "PrometheusRule", "vllm-startup")
    assert rule["spec"] == yaml.safe_load(generate.PROMETHEUS_RULE.read_text())["spec"]
    groups = {g["name"] for g in rule["spec"]["groups"]}
    for path in (generate.RULES, generate.ALERTS):  # recording and alerting groups, as the mixin ships them
        assert {g["name"] for g in yaml.safe_load(path.read_text())["groups"]} <= groups
    for uid in generate.dashboards():
        cm = one("base", "ConfigMap", f"grafana-dashboard-{uid}")
        assert cm["metadata"]["labels"] == generate.SIDECAR_LABEL
        assert json.loads(cm["data"][f"{uid}.json"]) == json.loads((generate.JSON_DIR / f"{uid}.json").read_text())


def test_kube_prometheus_stack_overlay_labels_rules_and_monitors_for_its_selector():
    for kind, name in (("PrometheusRule", "vllm-startup"), ("PodMonitor", "vllm")):
        assert one("overlays/kube-prometheus-stack", kind, name)["metadata"]["labels"]["release"]


def test_example_overlay_names_the_cluster_in_every_place():
    e = env(container("overlays/example"))
    cluster = e["K8S_CLUSTER_NAME"]["value"]
    assert cluster != "my-cluster"
    assert env(container("overlays/example", "otel-collector"))["K8S_CLUSTER_NAME"]["value"] == cluster
    monitor = one("overlays/example", "PodMonitor", "vllm")["spec"]["podMetricsEndpoints"][0]
    assert {r["targetLabel"]: r.get("replacement") for r in monitor["relabelings"]}[v.CLUSTER] == cluster


# --- one label vocabulary for both ingest paths --------------------------------------------------------------

def _relabel_targets(rules: list[dict], target_key: str) -> set[str]:
    return {r[target_key] for r in rules if r.get(target_key)}


def test_pod_monitor_relabels_to_the_otlp_label_names():
    endpoint = one("base", "PodMonitor", "vllm")["spec"]["podMetricsEndpoints"][0]
    assert _relabel_targets(endpoint["relabelings"], "targetLabel") == IDENTITY


MIXIN_RULES = {generate.RULES.name: generate.RULES, generate.ALERTS.name: generate.ALERTS}


def _check_config_with_the_mixin_rules(path: Path, tmp_path: Path) -> None:
    """The config loads exactly the mixin's recording and alerting rules files (mounted at its rule_files
    paths); promtool checks the config with them in place."""
    config = yaml.safe_load(path.read_text())
    assert sorted(Path(f).name for f in config["rule_files"]) == sorted(MIXIN_RULES)
    config["rule_files"] = [str(MIXIN_RULES[Path(f).name]) for f in config["rule_files"]]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    r = fleet_tools.run(fleet_tools.tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    assert r.returncode == 0 and r.stdout.count("SUCCESS") >= 3, r.stdout + r.stderr


def test_plain_prometheus_scrape_relabels_to_the_otlp_label_names(tmp_path):
    path = fleet_tools.REPO / "deploy/prometheus/prometheus-kubernetes.yaml"
    (job,) = yaml.safe_load(path.read_text())["scrape_configs"]
    assert _relabel_targets(job["relabel_configs"], "target_label") == IDENTITY
    _check_config_with_the_mixin_rules(path, tmp_path)


def test_local_prometheus_labels_the_host_target_like_the_otlp_path(tmp_path):
    config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert set(job["static_configs"][0]["labels"]) <= IDENTITY
    _check_config_with_the_mixin_rules(COMPOSE / "prometheus.yml", tmp_path)


def test_startup_metrics_reach_each_store_once():
    """The base sends startup metrics over OTLP: its scrapes drop them, or every start would count twice."""
    startup = [sc.prom_name(m) for m in sc.STARTUP_METRICS]
    drops = [one("base", "PodMonitor", "vllm")["spec"]["podMetricsEndpoints"][0]["metricRelabelings"][0]["regex"],
             yaml.safe_load((COMPOSE / "prometheus.yml").read_text())["scrape_configs"][0]["metric_relabel_configs"][0]
             ["regex"]]
    for regex in drops:
        assert all(re.fullmatch(regex, m) for m in startup)  # (the fingerprint never is on /metrics: OTLP only)
    scrape_only = one("overlays/scrape-only", "PodMonitor", "vllm")["spec"]["podMetricsEndpoints"][0]
    assert "metricRelabelings" not in scrape_only
    assert env(container("overlays/scrape-only"))["OTEL_METRICS_EXPORTER"]["value"] == "none"


# --- local compose -----------------------------------------------------------------------------------------

def test_compose_file_is_valid_and_mounts_the_generated_files():
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    schema = json.loads(fleet_tools.data_file(fleet_tools.COMPOSE_SCHEMA).read_text())
    errors = [e.message for e in jsonschema.Draft201909Validator(schema).iter_errors(compose)]
    assert not errors, errors
    assert {"otel-collector", "tempo", "prometheus", "grafana"} <= set(compose["services"])
    mounted = [vol.split(":")[0] for s in compose["services"].values() for vol in s.get("volumes", [])]
    for src in mounted:
        if src.startswith("."):
            assert (COMPOSE / src).exists(), src
    assert "../../mixin/dashboards_out" in mounted
    assert {"../../mixin/prometheus_rules.yaml", "../../mixin/prometheus_alerts.yaml"} <= set(mounted)
    prometheus_mounts = dict(m.split(":")[:2] for m in compose["services"]["prometheus"]["volumes"])
    rule_files = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())["rule_files"]
    assert sorted(prometheus_mounts[f"../../mixin/{name}"] for name in MIXIN_RULES) == sorted(rule_files)


def test_local_collector_and_grafana_provisioning_fit_together():
    config = yaml.safe_load((COMPOSE / "otel-collector.yaml").read_text())
    _assert_components_defined(config)
    datasources = yaml.safe_load((COMPOSE / "grafana/provisioning/datasources/datasources.yaml").read_text())
    assert {d["type"] for d in datasources["datasources"]} == {"prometheus", "tempo"}
    provider = yaml.safe_load((COMPOSE / "grafana/provisioning/dashboards/vllm-startup.yaml").read_text())
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    grafana_mounts = dict(m.split(":")[:2] for m in compose["services"]["grafana"]["volumes"])
    assert grafana_mounts["../../mixin/dashboards_out"] == provider["providers"][0]["options"]["path"]


def test_exemplars_are_stored_and_link_to_the_trace_datasource():
    """Prometheus keeps the counters' exemplars, the Prometheus datasource turns their trace_id label into a link to
    the Tempo datasource, and every graph over a raw startup counter asks for them."""
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    assert "--enable-feature=exemplar-storage" in compose["services"]["prometheus"]["command"]
    sources = {d["type"]: d for d in yaml.safe_load(
        (COMPOSE / "grafana/provisioning/datasources/datasources.yaml").read_text())["datasources"]}
    [link] = sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert link == {"name": "trace_id", "datasourceUid": sources["tempo"]["uid"]}
    # a raw startup counter of /metrics (recorded series have none; the resource counters come over OTLP only)
    counters = [sc.prom_name(m) for m, (kind, *_) in sc.STARTUP_METRICS.items() if kind == "counter"]
    raw = re.compile(r"\b(" + "|".join(counters) + r")\{")
    targets = [t for path in sorted((fleet_tools.REPO / "mixin/dashboards_out").glob("*.json"))
               for panel in json.loads(path.read_text())["panels"] for t in panel.get("targets", [])
               if raw.search(t.get("expr", "")) and not t.get("instant")]  # a graph draws exemplars, a stat not
    assert targets and all(t.get("exemplar") is True for t in targets), targets


def test_the_unchanged_command_path_is_one_set_of_variables_in_the_image_the_chart_and_the_runtime():
    """deploy/adoption: the production-stack values and the KServe runtime turn the agent on with the same variables
    (OpenTelemetry's sitecustomize folder on PYTHONPATH, at the link deploy/image makes; our distro and configurator
    named), leave the command alone, and the e2e Operator layout starts vLLM with exactly these
    (tests/e2e/test_layouts.py adoption_env)."""
    wanted = {"PYTHONPATH": "/opt/otel-auto-instrumentation", "OTEL_PYTHON_DISTRO": "vllm_startup",
              "OTEL_PYTHON_CONFIGURATOR": "vllm_startup"}
    values = yaml.safe_load((fleet_tools.REPO / "deploy/adoption/production-stack-values.yaml").read_text())
    [model] = values["servingEngineSpec"]["modelSpec"]
    runtime = yaml.safe_load((fleet_tools.REPO / "deploy/adoption/kserve-servingruntime.yaml").read_text())
    [container] = runtime["spec"]["containers"]
    for env in (model["env"], container["env"]):
        got = {e["name"]: e.get("value") for e in env}
        assert {k: got.get(k) for k in wanted} == wanted
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" in got
    assert container["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]  # KServe's, unchanged
    assert "command" not in model  # the chart's own `vllm serve`
    dockerfile = (fleet_tools.REPO / "deploy/image/Dockerfile").read_text()
    assert "/opt/otel-auto-instrumentation" in dockerfile and "auto_instrumentation" in dockerfile


def test_image_bakes_the_package_in():
    dockerfile = (fleet_tools.REPO / "deploy/image/Dockerfile").read_text()
    assert "vllm-otel-startup" in dockerfile and "opentelemetry-instrument" in dockerfile
    assert Path(fleet_tools.REPO / "deploy/README.md").exists()


def test_scrapes_ask_for_the_path_that_serves_exemplars():
    """Every scrape of vLLM we ship asks for the path the end-to-end harness scrapes and proves exemplars on
    (support/harness.METRICS_PATH: vLLM's prometheus-client mount, OpenMetrics; tests/e2e/test_startup_metrics.py)."""
    from support.harness import METRICS_PATH

    [monitor] = [d for d in yaml.safe_load_all((KUSTOMIZE / "base/podmonitor.yaml").read_text()) if d]
    assert {e["path"] for e in monitor["spec"]["podMetricsEndpoints"]} == {METRICS_PATH}
    plain = yaml.safe_load((fleet_tools.REPO / "deploy/prometheus/prometheus-kubernetes.yaml").read_text())
    assert [j["metrics_path"] for j in plain["scrape_configs"] if j["job_name"] == "vllm"] == [METRICS_PATH]
