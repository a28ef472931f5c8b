"""dashboards.queries.all_queries(): every dashboard panel's and alert rule's PromQL, concrete, with the labels
its result must carry — the input of the end-to-end proof against real metric stores."""

from __future__ import annotations

import fleet_tools
import pytest
import yaml

from dashboards import alerts, generate, promql_ast, queries
from dashboards import vocabulary as v

QUERIES = queries.all_queries()
BY_SOURCE = {q.source: q for q in QUERIES}


def _prometheus_targets() -> list[tuple[str, str, str]]:
    out = []
    for uid, doc in generate.dashboards().items():
        for panel in queries.walk_panels(doc["panels"]):
            for t in panel.get("targets") or []:
                if t["datasource"]["type"] == "prometheus":
                    out.append((uid, panel["title"], t["refId"]))
    return out


def test_all_queries_cover_every_panel_target_and_every_alert():
    for uid, title, ref in _prometheus_targets():
        assert f"dashboard/{uid}/{title}/{ref}" in BY_SOURCE
    for a in alerts.alerts():
        assert BY_SOURCE[f"alert/{a.name}"].expr == a.expr
        for c in a.checks:
            assert f"alert/{a.name}/{c.name}" in BY_SOURCE
    assert len(BY_SOURCE) == len(QUERIES), "sources are unique"


def test_every_dashboard_is_queried():
    assert {q.source.split("/")[1] for q in QUERIES if q.source.startswith("dashboard/")} == set(generate.dashboards())


def test_no_template_variable_survives_substitution():
    for q in QUERIES:
        assert "$" not in q.expr.replace('"$1"', ""), q.source  # "$1" is label_replace's capture group


def test_substitution_is_the_documented_one():
    expr = queries.substitute('sum(rate(x{a=~"$cluster", b=~"${model:regex}"}[$__rate_interval])) '
                              "/ max_over_time(y[$__range] offset $__range)", {"cluster", "model"})
    assert expr == 'sum(rate(x{a=~".*", b=~".*"}[5m])) / max_over_time(y[1h] offset 1h)'
    with pytest.raises(KeyError):
        queries.substitute('x{a=~"$nope"}', {"cluster"})


def test_every_query_parses():
    for q in QUERIES:
        promql_ast.parse(q.expr)


def test_every_query_parses_in_prometheus(tmp_path):
    """Prometheus' own parser (promtool) accepts every query, as a recording rule."""
    rules = [{"record": f"check:q{i}", "expr": q.expr} for i, q in enumerate(QUERIES)]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "all", "rules": rules}]}))
    r = fleet_tools.run(fleet_tools.tool("promtool"), "check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_expected_labels_follow_the_grouping():
    assert BY_SOURCE["dashboard/vllm-startup-fleet/Outcome/A"].labels == {v.OUTCOME}
    assert BY_SOURCE["dashboard/vllm-startup-fleet/Phase breakdown (mean per start)/A"].labels == {v.PHASE}
    assert BY_SOURCE["dashboard/vllm-startup-fleet/Time to ready/A"].labels == frozenset()
    assert BY_SOURCE["alert/VllmStartupSlow/time_to_ready_p95"].labels == {v.CLUSTER, v.MODEL}
    assert BY_SOURCE["alert/VllmPodSlowToReady"].labels == {v.KSM_NAMESPACE, v.KSM_POD}


def test_slowest_starts_carry_the_trace_id_but_not_the_optional_causes():
    q = BY_SOURCE["dashboard/vllm-startup-fleet/Slowest starts/A"]
    assert {v.TRACE_ID, v.POD, v.MODEL, v.OUTCOME} <= q.labels
    assert not q.labels & v.MAY_BE_EMPTY  # an eager start has no compile-cache label


def test_cause_labels_of_other_metrics_stay_expected():
    q = BY_SOURCE["alert/VllmStartupWeightsDownloaded/bytes_by_source"]
    assert v.WEIGHTS_SOURCE in q.labels  # always set on the weights counter


def test_needs_and_paths_use_only_documented_values():
    for q in QUERIES:
        assert q.needs <= queries.NEEDS, q.source
        assert q.paths and q.paths <= {queries.OTLP, queries.SCRAPE}, q.source


def test_resource_fingerprint_and_failed_starts_are_otlp_only():
    for q in QUERIES:
        series = promql_ast.used(q.expr).series
        if series & {v.CPU_TIME, v.MEMORY_USAGE, v.DISK_IO, v.GPU_MEMORY_USAGE} or queries.al.FAILED_START in q.needs:
            assert q.paths == {queries.OTLP}, q.source


def test_full_alert_expressions_need_firing_and_their_checks_do_not():
    for q in QUERIES:
        if q.source.startswith("alert/"):
            assert (alerts.FIRING in q.needs) == (q.source.count("/") == 1), q.source


def test_one_ready_start_answers_most_queries():
    """What the proof can check with one ready start (no GPU, no KSM, eager): nearly every panel."""
    answerable = [q for q in QUERIES if not q.needs]
    assert len(answerable) >= 0.6 * len(QUERIES)
    assert any(q.source.startswith("dashboard/vllm-startup-compare/") for q in answerable)
    assert any(q.source.startswith("dashboard/vllm-startup-one-start/") for q in answerable)


def test_fleet_distributions_read_the_recording_rules_and_per_start_questions_do_not():
    """Quantiles, means and ratios over many starts read recorded series (over the rule's window as they are,
    over a dashboard's range summed over time); every phase panel does; counts over a range, per-start tables and
    per-start alerts read the raw series (recording.py says why). ``raw`` is the same query with no recording."""
    from dashboards import recording

    buckets = recording.lookup(v.LAST_START, "bucket", [], [f'{v.OUTCOME}="{v.READY}"'])
    ttr = BY_SOURCE["dashboard/vllm-startup-fleet/Time to ready p50 / p95 / p99/B"]
    assert ttr.recorded == {buckets.record} and "sum_over_time" not in ttr.expr
    over_range = BY_SOURCE["dashboard/vllm-startup-fleet/Time to ready/A"]
    assert over_range.recorded == {buckets.record} and "sum_over_time" in over_range.expr
    assert BY_SOURCE["alert/VllmStartupSlow"].recorded
    for q_ in QUERIES:
        if v.PHASE_LAST in promql_ast.used(q_.raw).series and q_.source.startswith("dashboard/vllm-startup-"):
            assert q_.recorded and v.PHASE_LAST not in promql_ast.used(q_.expr).series, q_.source
    for source in ("dashboard/vllm-startup-fleet/Starts/A", "dashboard/vllm-startup-fleet/Slowest starts/A",
                   "alert/VllmStartupPhaseOverBudget", "alert/VllmStartupCrashLooping"):
        assert not BY_SOURCE[source].recorded and BY_SOURCE[source].raw == BY_SOURCE[source].expr, source
    for q in QUERIES:
        assert not promql_ast.used(q.raw).series & set(recording.BY_RECORD), q.source
        assert (q.raw != q.expr) == bool(q.recorded), q.source
        if q.recorded:  # same question: the same result labels
            assert promql_ast.output_labels(q.raw) == promql_ast.output_labels(q.expr), q.source
