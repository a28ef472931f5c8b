"""Every dashboard and alert query uses only names the code defines (as vLLM checks its own dashboards): metrics
of semconv.METRICS, and recording-rule series only where the shipped rules file (mixin/prometheus_rules.yaml)
records them from such metrics."""

from __future__ import annotations

import re

import pytest
import yaml

from dashboards import alerts, generate, one_start, phases, promql_ast, queries, recording
from dashboards import vocabulary as v
from vllm_otel_startup import semconv as sc

BASE = v.allowed_series()


def recorded_from_defined_metrics(groups: list[dict]) -> dict[str, frozenset[str]]:
    """The rules file's recorded series whose expressions select only defined series and labels (else the
    test fails here), with the labels they carry."""
    recorded = recording.recorded_series(groups)
    for g in groups:
        for rule in g["rules"]:
            used = promql_ast.used(rule["expr"])
            undefined = used.series - set(BASE)
            assert used.series and not undefined, f"{rule['record']} reads undefined {undefined}"
            for series, labels in used.selectors:
                assert set(labels) <= BASE[series], rule["record"]
            assert used.labels <= set().union(*(BASE[s] for s in used.series)), rule["record"]
            # a bucket recording adds its bound as le (label_replace): the only label a rule may create
            assert used.created <= {v.LE}, rule["record"]
            assert recorded[rule["record"]] <= set().union(*(BASE[s] for s in used.series)) | used.created, \
                rule["record"]
    return recorded


SHIPPED_RULES = yaml.safe_load(generate.RULES.read_text())["groups"]
ALLOWED = {**BASE, **recorded_from_defined_metrics(SHIPPED_RULES)}
QUERIES = queries.all_queries()
IDS = [q.source for q in QUERIES]


@pytest.mark.parametrize("query", QUERIES, ids=IDS)
def test_every_query_uses_only_defined_metrics(query):
    unknown = promql_ast.used(query.expr).series - set(ALLOWED)
    assert not unknown, f"{query.source} selects undefined series {unknown}"


@pytest.mark.parametrize("query", QUERIES, ids=IDS)
def test_every_query_uses_only_defined_labels(query):
    used = promql_ast.used(query.expr)
    for series, labels in used.selectors:
        assert set(labels) <= ALLOWED[series], f"{query.source}: {series} has no label {set(labels) - ALLOWED[series]}"
    reachable = set().union(*(ALLOWED[s] for s in used.series)) | used.created
    assert used.labels <= reachable, f"{query.source} groups or matches by undefined {used.labels - reachable}"
    assert used.created <= set().union(*ALLOWED.values()), f"{query.source} creates labels outside the vocabulary"


def test_label_replace_only_renames_kube_state_metrics_to_our_identity_names():
    for q in QUERIES:
        assert promql_ast.used(q.expr).created <= {v.NAMESPACE, v.POD, v.PHASE, v.LE}, q.source


def test_recorded_series_are_allowed_only_as_the_rules_file_defines_them():
    assert {r.record for r in recording.RECORDINGS} <= set(ALLOWED) - set(BASE)
    # a rules file without a recording: queries reading it would select an undefined series
    without = [{**g, "rules": [r for r in g["rules"] if r["record"] != recording.RECORDINGS[0].record]}
               for g in SHIPPED_RULES]
    assert recording.RECORDINGS[0].record not in recorded_from_defined_metrics(without)
    # a recording computed from a metric the code does not define is refused
    bad = [{"name": "g", "rules": [{"record": "fleet:made_up:sum",
                                    "expr": "sum by (le) (vllm_startup_made_up_bucket)"}]}]
    with pytest.raises(AssertionError, match="undefined"):
        recorded_from_defined_metrics(bad)
    # a recorded series does not carry a label its rule aggregated away
    starts = next(r.record for r in recording.RECORDINGS if r.source == v.LAST_START)
    assert v.POD not in ALLOWED[starts] and v.TRACE_ID not in ALLOWED[starts] and v.MODEL in ALLOWED[starts]


def test_a_query_with_an_unknown_metric_or_label_is_caught():
    bad = promql_ast.used('sum by (vllm_gpu) (vllm_startup_phase_last_duration_seconds{vllm_startup_stage="x"})')
    series, labels = bad.selectors[0]
    assert "vllm_startup_stage" not in ALLOWED[series] and "vllm_gpu" not in ALLOWED[series]
    assert "vllm_startup_total_seconds" not in ALLOWED
    assert "vllm_startup_phase_duration_seconds_bucket" not in ALLOWED  # the per-span histogram is gone


def test_template_variable_queries_use_only_defined_names():
    for source, query in queries.variable_queries():
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
        assert m, f"{source}: {query}"
        used = promql_ast.used(m.group(1).replace("$", ""))
        (series, labels), = used.selectors
        assert series in ALLOWED and m.group(2) in ALLOWED[series] and set(labels) <= ALLOWED[series], source


def test_every_name_comes_from_the_package_vocabulary():
    assert sc.prom_name("vllm.startup.phase.last_duration") == v.PHASE_LAST
    assert v.PHASE_LAST == "vllm_startup_phase_last_duration_seconds"
    assert set(v.FLEET_LABELS) == {sc.prom_label(x) for x in sc.FLEET_LABELS}
    assert {v.CLUSTER, v.NAMESPACE, v.POD, v.NODE} <= {sc.prom_label(a) for a in sc.K8S_ENV}
    assert v.START_KEYS == (v.CLUSTER, v.NAMESPACE, v.POD)


def test_ksm_allowlist_is_documented():
    readme = (queries.generate.ROOT / "dashboards" / "README.md").read_text()
    for name in v.KSM_SERIES:
        assert f"`{name}`" in readme


def test_label_values_are_the_documented_ones():
    docs = queries.generate.ROOT / "docs"  # the telemetry reference's pages, where the labels and their values are
    doc = "\n".join((docs / page).read_text() for page in ("telemetry.md", "metrics.md", "patch-points.md"))
    for values in v.LABEL_VALUES.values():
        for value in values:
            assert f"`{value}`" in doc, value


def test_stacked_phases_exist_and_never_nest():
    assert set(phases.STACKED_PHASES) <= set(sc.PHASES)
    for phase in phases.STACKED_PHASES:
        assert not phases.inside(phase) & set(phases.STACKED_PHASES), f"{phase} contains another stacked phase"


def test_every_phase_has_its_place_in_the_nesting():
    placed = set(phases.CONTAINS) | {c for cs in phases.CONTAINS.values() for c in cs}
    assert placed == set(sc.PHASES), "classify new phase ids in dashboards/phases.py CONTAINS"


def test_waiting_and_process_spans_are_never_stacked():
    for phase in ("startup", "engine_core_process", "worker_process", "engine_wait", "worker_wait", "model_load"):
        assert phase not in phases.STACKED_PHASES


def test_alert_budgets_name_real_phases_and_sit_on_bucket_boundaries():
    b = alerts.Budgets()
    assert set(b.phase_s) <= set(sc.PHASES)
    for seconds in [b.ready_s, *b.ready_by_model_s.values()]:
        assert f"{seconds:g}" in recording.READY_BOUNDS  # p95 > budget is then exact (alerts.py)


_TRACEQL_NAMES = re.compile(r"\b(span|resource)\.([a-z0-9_.]+)")


def test_traceql_uses_only_span_vocabulary():
    span_attrs = {getattr(sc, n) for n in dir(sc) if n.isupper() and isinstance(getattr(sc, n), str)}
    resource_attrs = set(sc.K8S_ENV) | {"service.name", sc.PROCESS_KIND, "process.pid"}
    for query in one_start.TRACEQL:
        for scope, name in _TRACEQL_NAMES.findall(query):
            assert name in (span_attrs if scope == "span" else resource_attrs), f"{scope}.{name} in {query}"
        for span_name in re.findall(r'name = "([^"]+)"', query):
            assert span_name == sc.ROOT_SPAN
