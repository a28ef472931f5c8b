"""The alert and recording rules: valid for promtool, shipped identically as the mixin's rules files and a
PrometheusRule, documented in docs/runbooks.md, and firing exactly when they should (promtool rule unit tests on
synthetic series, with the recording rules the alerts read evaluated alongside).

Series in these tests look like the stores hold them: a start's series appear at the minute the start got
ready and keep their value (a scrape of a running server, or repeated OTLP exports); counters never increase
after that, which is why the rules count new series rather than use increase(). The rules under test are
generated from ``alerts.Budgets`` (short look-back windows where the defaults span days) with their
annotations removed: promtool compares rendered annotations verbatim, and `promtool check rules` already
checks their templates.
"""

from __future__ import annotations

import json
from pathlib import Path

import fleet_tools
import pytest
import yaml

from dashboards import alerts, generate, recording
from dashboards import vocabulary as v
from vllm_otel_startup import semconv as sc

PROMTOOL = "promtool"
RUNBOOKS = fleet_tools.REPO / "docs" / "runbooks.md"
MINUTES = 400  # length of every synthetic series, at 1m
SHORT = alerts.Budgets(baseline="3h", compile_history="3h")

FLEET = {v.MODEL: "m", v.VLLM_VERSION: "0.11.0", v.DEVICE: "cuda", v.DEVICE_MODEL: "H100", v.TENSOR_SIZE: "1",
         v.PIPELINE_SIZE: "1", sc.prom_label(sc.DP_SIZE): "1", v.MODE: "cold", v.COMPILE_MODE: "VLLM_COMPILE"}


def start_labels(pod: str = "p1", **overrides: str) -> dict[str, str]:
    return {v.CLUSTER: "c1", v.NAMESPACE: "ns", v.POD: pod, **FLEET, **overrides}


def series(name: str, labels: dict[str, str], value: float, first: int, last: int = MINUTES) -> dict:
    """A series absent until minute ``first``, then ``value`` until minute ``last``."""
    body = ", ".join(f'{k}="{val}"' for k, val in labels.items())
    tokens = ["_"] * first + [f"{value:g}"] * (last - first) + ["_"] * (MINUTES - last)
    return {"series": f"{name}{{{body}}}", "values": " ".join(tokens)}


def last_start(pod: str, trace: str, seconds: float, first: int, outcome: str = v.READY, **labels: str) -> dict:
    return series(v.LAST_START, {**start_labels(pod, **labels), v.OUTCOME: outcome, v.TRACE_ID: trace},
                  seconds, first)


def phase(pod: str, name: str, seconds: float, first: int, kind: str = v.WORKER, last: int = MINUTES,
          **labels: str) -> list[dict]:
    return [series(v.PHASE_LAST, {**start_labels(pod, **labels), v.PHASE: name, v.PROCESS_KIND: kind}, seconds,
                   first, last)]


def assert_alerts(tmp_path: Path, alert: str, input_series: list[dict], at: int, expected: list[dict[str, str]],
                  budgets: alerts.Budgets = SHORT) -> None:
    groups = alerts.rule_groups(budgets)
    for g in groups:
        for rule in g["rules"]:
            rule.pop("annotations")
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "rules.yaml").write_text(generate.RULES.read_text())  # the recording rules alerts read
    severity = next(r["labels"]["severity"] for g in groups for r in g["rules"] if r["alert"] == alert)
    test = {"rule_files": ["rules.yaml", "alerts.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": input_series,
                       "alert_rule_test": [{"eval_time": f"{at}m", "alertname": alert,
                                            "exp_alerts": [{"exp_labels": {**e, "severity": severity}}
                                                           for e in expected]}]}]}
    (tmp_path / "test.yaml").write_text(json.dumps(test))
    r = fleet_tools.run(fleet_tools.tool(PROMTOOL), "test", "rules", "test.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


# --- the shipped files --------------------------------------------------------------------------------------

def test_rules_files_pass_promtool_check():
    r = fleet_tools.run(fleet_tools.tool(PROMTOOL), "check", "rules", str(generate.ALERTS))
    assert r.returncode == 0 and f"SUCCESS: {len(alerts.alerts())} rules found" in r.stdout, r.stdout + r.stderr
    r = fleet_tools.run(fleet_tools.tool(PROMTOOL), "check", "rules", str(generate.RULES))
    assert r.returncode == 0 and f"SUCCESS: {len(recording.RECORDINGS)} rules found" in r.stdout, r.stdout + r.stderr


def test_mixin_has_the_layout_kube_prometheus_users_consume():
    """dashboards_out/ (+ the v2 form), prometheus_alerts.yaml (alerts only), prometheus_rules.yaml (recording
    rules only), as `mixtool generate all` lays a mixin out."""
    wanted = sorted(f"{uid}.json" for uid in generate.dashboards())
    assert sorted(p.name for p in generate.JSON_DIR.glob("*.json")) == wanted
    assert sorted(p.name for p in generate.V2_DIR.glob("*.json")) == wanted
    alert_rules = [r for g in yaml.safe_load(generate.ALERTS.read_text())["groups"] for r in g["rules"]]
    recorded = [r for g in yaml.safe_load(generate.RULES.read_text())["groups"] for r in g["rules"]]
    assert alert_rules and all("alert" in r and "record" not in r for r in alert_rules)
    assert recorded and all("record" in r and "alert" not in r for r in recorded)


def test_runbook_urls_follow_one_pattern(tmp_path):
    """Every runbook_url is <runbook base>#<alert name, lowercased>, the base set once (--runbook-base), and the
    anchor is the GitHub anchor of the alert's section in docs/runbooks.md. The default base is the project's
    published docs/runbooks.md: absolute, so the link opens from Alertmanager and Grafana."""
    assert alerts.RUNBOOK_BASE == generate.RUNBOOK_BASE == (
        "https://github.com/vllm-otel-startup/vllm-otel-startup/blob/main/docs/runbooks.md")
    for base in ("https://example.com/vllm-otel-startup/blob/main/docs/runbooks.md", generate.RUNBOOK_BASE):
        shipped = yaml.safe_load(generate.alerts_file(runbook_base=base))
        urls = [r["annotations"]["runbook_url"] for g in shipped["groups"] for r in g["rules"]]
        assert urls == [f"{base}#{a.anchor}" for g in shipped["groups"] for a in alerts.alerts()
                        if a.group == g["name"]]
    committed = yaml.safe_load(generate.ALERTS.read_text())
    assert {r["annotations"]["runbook_url"] for g in committed["groups"] for r in g["rules"]} == {
        f"{generate.RUNBOOK_BASE}#{a.anchor}" for a in alerts.alerts()}
    headings = {line[3:].strip().lower() for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")}
    for a in alerts.alerts():
        assert a.anchor in headings, a.name


def _runbook_urls(node: object) -> list[str]:
    if isinstance(node, dict):
        return [*([str(node["runbook_url"])] if "runbook_url" in node else []),
                *(u for value in node.values() for u in _runbook_urls(value))]
    if isinstance(node, list):
        return [u for item in node for u in _runbook_urls(item)]
    return []


def test_no_committed_alert_has_a_relative_runbook_url(tmp_path):
    """Every runbook_url in every YAML or JSON file of the repository opens from Alertmanager or Grafana (an
    absolute http(s) URL); the generator refuses a relative base on the command line as in a configuration."""
    found: dict[str, list[str]] = {}
    for path in sorted(fleet_tools.REPO.rglob("*")):
        rel = path.relative_to(fleet_tools.REPO)
        if path.suffix not in (".yaml", ".yml", ".json") or any(p.startswith(".") or p == "node_modules"
                                                                    for p in rel.parts):
            continue
        text = path.read_text()
        if "runbook_url" in text:
            loaded = json.loads(text) if path.suffix == ".json" else list(yaml.safe_load_all(text))
            found[str(rel)] = _runbook_urls(loaded)
    assert {generate.ALERTS.relative_to(fleet_tools.REPO).as_posix(),
            generate.PROMETHEUS_RULE.relative_to(fleet_tools.REPO).as_posix()} <= set(found)
    relative = {f: [u for u in urls if not generate.is_absolute_url(u)] for f, urls in found.items()}
    assert all(found.values()) and not any(relative.values()), relative
    assert generate.main(["--runbook-base", "docs/runbooks.md", "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_recording_rules_are_used_and_computed_from_defined_metrics():
    """Each recording is read by some dashboard or alert (no dead rule), and its expression selects only
    vocabulary series (what tests/fleet/test_vocabulary.py then accepts queries to select)."""
    from dashboards import queries

    read = set().union(*(q.recorded for q in queries.all_queries()))
    assert read == {r.record for r in recording.RECORDINGS}
    allowed = v.allowed_series()
    for r in recording.RECORDINGS:
        used = generate.ast.used(r.expr)
        assert used.series == {r.source} and r.source in allowed, r.record
        assert set(r.keep) <= allowed[r.source], set(r.keep) - allowed[r.source]


def test_every_rule_expression_fits_a_victoriametrics_query():
    """vmalert sends each expression as a query; VictoriaMetrics refuses one over -search.maxQueryLen (16 KB)."""
    for path in (generate.RULES, generate.ALERTS):
        for g in yaml.safe_load(path.read_text())["groups"]:
            for rule in g["rules"]:
                assert len(rule["expr"].encode()) <= 16384, rule.get("record") or rule.get("alert")


def test_promtool_rejects_a_broken_rule(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": "X", "expr": "sum(("}]}]}))
    assert fleet_tools.run(fleet_tools.tool(PROMTOOL), "check", "rules", str(bad)).returncode == 1


def test_prometheus_rule_ships_the_same_groups_as_the_rules_files(tmp_path):
    plain = yaml.safe_load(generate.RULES.read_text())["groups"] + yaml.safe_load(generate.ALERTS.read_text())["groups"]
    resource = yaml.safe_load(generate.PROMETHEUS_RULE.read_text())
    assert resource["apiVersion"] == "monitoring.coreos.com/v1" and resource["kind"] == "PrometheusRule"
    assert resource["spec"]["groups"] == plain
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(resource["spec"]))
    assert fleet_tools.run(fleet_tools.tool(PROMTOOL), "check", "rules", str(spec)).returncode == 0


def test_prettified_expressions_mean_what_the_code_says():
    shipped = {r["alert"]: r["expr"] for g in yaml.safe_load(generate.ALERTS.read_text())["groups"] for r in g["rules"]}
    for a in alerts.alerts():
        assert str(generate.ast.parse(shipped[a.name])) == str(generate.ast.parse(a.expr)), a.name
    groups = yaml.safe_load(generate.RULES.read_text())["groups"]
    recorded = {r["record"]: r["expr"] for g in groups for r in g["rules"]}
    for rec in recording.RECORDINGS:
        assert str(generate.ast.parse(recorded[rec.record])) == str(generate.ast.parse(rec.expr)), rec.record


@pytest.mark.parametrize("alert", alerts.alerts(), ids=lambda a: a.name)
def test_every_alert_has_summary_description_and_runbook(alert):
    rule = alert.rule(generate.RUNBOOK_BASE)
    assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    assert rule["annotations"]["runbook_url"] == f"{generate.RUNBOOK_BASE}#{alert.name.lower()}"
    text = RUNBOOKS.read_text()
    assert f"\n## {alert.name}\n" in text, f"docs/runbooks.md has no section {alert.name}"
    section = text.split(f"\n## {alert.name}\n", 1)[1].split("\n## ", 1)[0]
    for part in ("**What it means**", "**Look at**", "**Fix**"):
        assert part in section, f"{alert.name}: runbook section lacks {part}"


def test_alerts_select_the_deployed_container():
    deployment = yaml.safe_load((fleet_tools.REPO / "deploy/kubernetes/base/vllm-deployment.yaml").read_text())
    assert deployment["spec"]["template"]["spec"]["containers"][0]["name"] == alerts.Budgets().container


# --- slow pod readiness (kube-state-metrics) ----------------------------------------------------------------

def ksm_pod(pod: str, created_min: int, ready_min: int | None, container: str = "vllm") -> list[dict]:
    ident = {v.KSM_NAMESPACE: "ns", v.KSM_POD: pod, "uid": f"u-{pod}"}
    out = [series(v.KSM_CREATED, ident, created_min * 60, created_min),
           series(v.KSM_CONTAINER_INFO, {**ident, v.KSM_CONTAINER: container}, 1, created_min)]
    if ready_min is not None:
        out.append(series(v.KSM_READY_TIME, ident, ready_min * 60, ready_min))
    return out


def test_pod_slow_to_ready_fires_when_creation_to_ready_exceeds_the_budget(tmp_path):
    assert_alerts(tmp_path, "VllmPodSlowToReady", ksm_pod("slow", 100, 125) + ksm_pod("fast", 100, 105), 130,
                  [{v.KSM_NAMESPACE: "ns", v.KSM_POD: "slow"}])


def test_pod_slow_to_ready_fires_for_a_pod_still_not_ready(tmp_path):
    assert_alerts(tmp_path, "VllmPodSlowToReady", ksm_pod("stuck", 100, None), 120,
                  [{v.KSM_NAMESPACE: "ns", v.KSM_POD: "stuck"}])


def test_pod_slow_to_ready_ignores_other_containers_and_old_pods(tmp_path):
    series_ = ksm_pod("other", 100, 125, container="sidecar") + ksm_pod("old", 10, 40)
    assert_alerts(tmp_path, "VllmPodSlowToReady", series_, 200, [])


# --- our time to ready, per model ---------------------------------------------------------------------------

def test_startup_slow_fires_when_p95_time_to_ready_exceeds_the_budget(tmp_path):
    slow = [last_start("p1", "t1", 900, 100)]
    assert_alerts(tmp_path, "VllmStartupSlow", slow, 110, [{v.CLUSTER: "c1", v.MODEL: "m"}])


def test_startup_slow_stays_silent_for_fast_starts_and_for_starts_before_the_window(tmp_path):
    fast = last_start("p1", "t1", 120, 100)
    old_slow = last_start("p2", "t2", 900, 10, **{v.MODEL: "m2"})
    assert_alerts(tmp_path, "VllmStartupSlow", [fast, old_slow], 110, [])


def test_startup_slow_uses_per_model_budgets(tmp_path):
    budgets = alerts.Budgets(ready_by_model_s={"big-.*": 1200})
    starts = [last_start("p1", "t1", 900, 100, **{v.MODEL: "big-70b"}),
              last_start("p2", "t2", 900, 100, **{v.MODEL: "small"})]
    assert_alerts(tmp_path, "VllmStartupSlow", starts, 110, [{v.CLUSTER: "c1", v.MODEL: "small"}], budgets)


# --- failed and crash-looping starts ------------------------------------------------------------------------

def test_startup_failed_fires_on_a_failed_start(tmp_path):
    assert_alerts(tmp_path, "VllmStartupFailed",
                  [last_start("p1", "t1", 42, 100, v.FAILED), last_start("p2", "t2", 300, 100)], 105,
                  [{v.CLUSTER: "c1", v.NAMESPACE: "ns", v.MODEL: "m", v.VLLM_VERSION: "0.11.0"}])


def test_startup_failed_stays_silent_on_ready_starts(tmp_path):
    assert_alerts(tmp_path, "VllmStartupFailed", [last_start("p1", "t1", 300, 100)], 105, [])


def test_crash_looping_fires_on_three_starts_of_one_pod(tmp_path):
    starts = [last_start("p1", f"t{i}", 30, 100 + 5 * i, v.FAILED) for i in range(3)]
    starts.append(last_start("p2", "u1", 300, 100))
    assert_alerts(tmp_path, "VllmStartupCrashLooping", starts, 115, [{v.NAMESPACE: "ns", v.POD: "p1"}])


def test_crash_looping_fires_on_container_restarts(tmp_path):
    restarts = {"series": f'{v.KSM_RESTARTS}{{namespace="ns", pod="p9", uid="u", container="vllm"}}',
                "values": " ".join(str(min(i // 5, 4)) for i in range(MINUTES))}
    assert_alerts(tmp_path, "VllmStartupCrashLooping", [restarts], 20, [{v.NAMESPACE: "ns", v.POD: "p9"}])


def test_crash_looping_stays_silent_on_two_starts(tmp_path):
    starts = [last_start("p1", f"t{i}", 30, 100 + 5 * i) for i in range(2)]
    assert_alerts(tmp_path, "VllmStartupCrashLooping", starts, 115, [])


# --- phases ------------------------------------------------------------------------------------------------

def _phase_alert_labels(pod: str, name: str, kind: str = v.WORKER) -> dict[str, str]:
    return {v.CLUSTER: "c1", v.NAMESPACE: "ns", v.POD: pod, v.MODEL: "m", v.PHASE: name, v.PROCESS_KIND: kind}


def test_phase_over_budget_fires_and_names_the_phase(tmp_path):
    s = phase("p1", "torch_compile", 400, 100) + phase("p1", "weights_load", 100, 100)
    assert_alerts(tmp_path, "VllmStartupPhaseOverBudget", s, 110, [_phase_alert_labels("p1", "torch_compile")])


def test_phase_over_budget_judges_parallel_workers_by_the_slowest(tmp_path):
    def workers(*seconds: float) -> list[dict]:  # tensor-parallel workers of one start: one series each (OTLP)
        return [x for pid, s in enumerate(seconds) for x in phase("p1", "weights_load", s, 100,
                                                                   **{v.PROCESS_PID: str(300 + pid)})]

    assert_alerts(tmp_path, "VllmStartupPhaseOverBudget", workers(200, 250), 110, [])  # under 300 s
    assert_alerts(tmp_path, "VllmStartupPhaseOverBudget", workers(200, 350), 110,
                  [_phase_alert_labels("p1", "weights_load")])


def _baseline(n: int, seconds: float) -> list[dict]:
    return [x for i in range(n) for x in phase(f"old{i}", "torch_compile", seconds, 10 + 5 * i, last=60 + 5 * i)]


def test_phase_regressed_fires_against_the_fleets_recent_p95(tmp_path):
    s = _baseline(5, 40) + phase("new", "torch_compile", 100, 200)
    assert_alerts(tmp_path, "VllmStartupPhaseRegressed", s, 210, [_phase_alert_labels("new", "torch_compile")])


def test_phase_regressed_stays_silent_within_the_fleets_spread(tmp_path):
    s = _baseline(5, 40) + phase("new", "torch_compile", 50, 200)
    assert_alerts(tmp_path, "VllmStartupPhaseRegressed", s, 210, [])


def test_phase_regressed_counts_the_baseline_over_the_whole_window(tmp_path):
    """Five starts 20 minutes apart: never five in one hour, five in the baseline (the recorded hourly counts summed
    over it)."""
    spread = [x for i in range(5) for x in phase(f"old{i}", "torch_compile", 40, 10 + 20 * i, last=60 + 20 * i)]
    s = spread + phase("new", "torch_compile", 100, 200)
    assert_alerts(tmp_path, "VllmStartupPhaseRegressed", s, 210, [_phase_alert_labels("new", "torch_compile")])


def test_phase_regressed_needs_a_baseline_of_enough_starts(tmp_path):
    s = _baseline(3, 40) + phase("new", "torch_compile", 100, 200)
    assert_alerts(tmp_path, "VllmStartupPhaseRegressed", s, 210, [])


# --- caches and weights -----------------------------------------------------------------------------------

def compiles(pod: str, hit: str, first: int, last: int = MINUTES, **labels: str) -> dict:
    return series(v.COMPILES, {**start_labels(pod, **labels), v.COMPILE_CACHE_HIT: hit}, 1, first, last)


def test_compile_cache_miss_fires_when_the_fleet_compiled_before(tmp_path):
    s = [compiles("old", v.FALSE, 20, 60), compiles("new", v.FALSE, 200)]
    fleet = {k: val for k, val in start_labels("new").items() if k not in (v.POD, v.DEVICE,
                                                                           sc.prom_label(sc.DP_SIZE))}
    assert_alerts(tmp_path, "VllmStartupCompileCacheMiss", s, 210, [fleet])


def test_compile_cache_miss_stays_silent_on_a_fleets_first_compile_and_on_hits(tmp_path):
    s = [compiles("first", v.FALSE, 200, **{v.MODEL: "fresh"}), compiles("old", v.FALSE, 20, 60),
         compiles("new", v.TRUE, 200)]
    assert_alerts(tmp_path, "VllmStartupCompileCacheMiss", s, 210, [])


def test_weights_downloaded_fires_on_a_hub_download(tmp_path):
    s = [series(v.WEIGHTS_BYTES, {**start_labels("p1"), v.WEIGHTS_SOURCE: v.HUB_DOWNLOAD}, 16e9, 100),
         series(v.WEIGHTS_BYTES, {**start_labels("p2"), v.WEIGHTS_SOURCE: "hub_cache"}, 16e9, 100)]
    assert_alerts(tmp_path, "VllmStartupWeightsDownloaded", s, 110,
                  [{v.CLUSTER: "c1", v.NAMESPACE: "ns", v.MODEL: "m"}])


def test_weights_downloaded_stays_silent_with_a_shared_cache(tmp_path):
    s = [series(v.WEIGHTS_BYTES, {**start_labels("p1"), v.WEIGHTS_SOURCE: "local_dir"}, 16e9, 100)]
    assert_alerts(tmp_path, "VllmStartupWeightsDownloaded", s, 110, [])


def test_every_alert_has_a_firing_test():
    tested = {name.split("_fires")[0] for name in globals() if name.startswith("test_") and "_fires" in name}
    for a in alerts.alerts():
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in a.name).lstrip("_")
        assert f"test_{snake.removeprefix('vllm_').removeprefix('startup_')}" in tested or \
            f"test_{snake.removeprefix('vllm_')}" in tested, a.name


# --- a start still in progress -------------------------------------------------------------------------------

def in_progress(pod: str, name: str, first: int, last: int = MINUTES, kind: str = v.ENGINE_CORE,
                trace: str = "t-live") -> dict:
    """The in-progress gauge of a process in one phase since minute ``first``: 0, 60, 120, ... seconds."""
    labels = {**start_labels(pod), v.PROCESS_KIND: kind, v.PHASE: name, v.TRACE_ID: trace}
    body = ", ".join(f'{k}="{val}"' for k, val in labels.items())
    tokens = ["_"] * first + [f"0+60x{last - first - 1}"] + ["_"] * (MINUTES - last)
    return {"series": f"{v.IN_PROGRESS_PHASE_ELAPSED}{{{body}}}", "values": " ".join(tokens)}


def _stuck_labels(pod: str, name: str, kind: str = v.ENGINE_CORE, trace: str = "t-live") -> dict[str, str]:
    return {**_phase_alert_labels(pod, name, kind), v.TRACE_ID: trace}


def test_stuck_in_phase_fires_over_its_budget_when_the_fleet_has_no_history(tmp_path):
    s = [in_progress("p1", "torch_compile", 100)]  # 300 s budget (Budgets.phase_s): 360 s at minute 106
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 106, [_stuck_labels("p1", "torch_compile")])
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 104, [])  # 240 s: not yet


def test_stuck_in_phase_fires_far_over_the_fleets_usual_time_of_that_phase(tmp_path):
    old = [x for i in range(3) for x in phase(f"old{i}", "torch_compile", 20, 10 + 5 * i, kind=v.ENGINE_CORE,
                                              last=60 + 5 * i)]
    s = [*old, in_progress("new", "torch_compile", 200)]  # usual ~20 s: 180 s is over 3x and 60 s more
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 203, [_stuck_labels("new", "torch_compile")])
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 201, [])  # 60 s: over 3x, not 60 s more


def test_stuck_in_phase_stays_silent_within_the_fleets_usual_time_and_for_waiting_processes(tmp_path):
    old = [x for i in range(3) for x in phase(f"old{i}", "torch_compile", 100, 10 + 5 * i, kind=v.ENGINE_CORE,
                                              last=60 + 5 * i)]
    s = [*old, in_progress("new", "torch_compile", 200),  # 240 s against a usual ~100 s: under 3x
         in_progress("new", "engine_wait", 100, kind=v.API_SERVER)]  # 1 h in a waiting phase: never
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 204, [])


def test_stuck_in_phase_resolves_when_the_start_ends(tmp_path):
    # over OTLP the last in-progress point stays in the store; the start's last_start series ends it
    s = [in_progress("p1", "torch_compile", 100), last_start("p1", "t-live", 400, 107)]
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 106, [_stuck_labels("p1", "torch_compile")])
    assert_alerts(tmp_path, "VllmStartupStuckInPhase", s, 108, [])
