"""The generated dashboards: committed as generated, valid against Grafana's dashboard schema, importable into
any Grafana 11 (datasources are variables), and doing what the issue asks of each."""

from __future__ import annotations

import copy
import json
import re

import fleet_tools
import jsonschema
import pytest

from dashboards import fleet_compare, fleet_overview, generate, one_start, queries
from dashboards import vocabulary as v
from dashboards.variables import FLEET_FILTERS

DASHBOARDS = generate.dashboards()


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(fleet_tools.data_file(fleet_tools.GRAFANA_SCHEMA).read_text())
    return jsonschema.Draft7Validator(schema)


def _panels(doc: dict) -> list[dict]:
    return list(queries.walk_panels(doc["panels"]))


def test_committed_files_match_the_code():
    r = fleet_tools.run(fleet_tools.VENV_BIN.joinpath("python").as_posix(), "-m", "dashboards.generate", "--check")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_check_mode_reports_drift(monkeypatch, capsys):
    real = generate.files()
    drifted = {**real, generate.ALERTS: real[generate.ALERTS].replace("for: 0m", "for: 5m")}
    monkeypatch.setattr(generate, "files", lambda runbook_base, budgets=None: drifted)
    assert generate.main(["--check"]) == 1
    assert "for: 5m" in capsys.readouterr().out


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_dashboard_validates_against_grafana_schema(uid, validator):
    errors = [f"{e.json_path}: {e.message[:200]}" for e in validator.iter_errors(DASHBOARDS[uid])]
    assert not errors, errors


def test_schema_rejects_a_broken_dashboard(validator):
    broken = copy.deepcopy(DASHBOARDS[fleet_overview.UID])
    broken["titel"] = "typo"
    broken["refresh"] = 5
    broken["panels"][1]["gridPos"]["h"] = "eight"
    messages = " ".join(e.message for e in validator.iter_errors(broken))
    assert "titel" in messages and "'eight'" in messages and "5 is not of type" in messages


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_datasources_are_template_variables(uid):
    doc = DASHBOARDS[uid]
    variables = {x["name"]: x for x in doc["templating"]["list"]}
    for panel in _panels(doc):
        refs = [panel.get("datasource")] + [t.get("datasource") for t in panel.get("targets") or []]
        for ref in filter(None, refs):
            m = re.fullmatch(r"\$\{(\w+)\}", ref["uid"])
            assert m and variables[m.group(1)]["type"] == "datasource", (panel["title"], ref)
            assert variables[m.group(1)]["query"] == ref["type"]
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            assert re.fullmatch(r"\$\{\w+\}", var["datasource"]["uid"])


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_panels_have_unique_ids_and_lie_on_the_grid(uid):
    panels = DASHBOARDS[uid]["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        assert p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p.get("targets") and p.get("description") is not None, p["title"]


def test_every_target_has_a_ref_id():
    for doc in DASHBOARDS.values():
        for panel in _panels(doc):
            refs = [t["refId"] for t in panel.get("targets") or []]
            assert all(refs) and len(set(refs)) == len(refs), panel["title"]


def test_overview_answers_the_fleet_questions():
    titles = {p["title"] for p in _panels(DASHBOARDS[fleet_overview.UID])}
    for wanted in ("Starts per hour by outcome", "Time to ready p50 / p95 / p99", "Phase breakdown (mean per start)",
                   "Slowest starts", "Outcome", "Compile-cache hit ratio by model",
                   "Modelinfo-cache hit ratio by model", "Weight load throughput by source (GB/s)"):
        assert wanted in titles


def test_phase_breakdown_is_stacked_from_the_curated_phases():
    panel = next(p for p in _panels(DASHBOARDS[fleet_overview.UID]) if p["title"].startswith("Phase breakdown"))
    assert panel["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    expr = panel["targets"][0]["expr"]
    assert "|".join(fleet_overview.ph.STACKED_PHASES) in expr
    assert panel["targets"][1]["legendFormat"] == "other"


def test_slowest_starts_link_each_start_to_its_trace():
    panel = next(p for p in _panels(DASHBOARDS[fleet_overview.UID]) if p["title"] == "Slowest starts")
    override = next(o for o in panel["fieldConfig"]["overrides"] if o["matcher"]["options"] == v.TRACE_ID)
    (link,) = next(p["value"] for p in override["properties"] if p["id"] == "links")
    assert f"/d/{one_start.UID}/" in link["url"] and "var-trace_id=${__value.raw}" in link["url"]
    assert f"var-pod=${{__data.fields.{v.POD}}}" in link["url"]


def test_compare_has_two_independent_fleet_selections():
    doc = DASHBOARDS[fleet_compare.UID]
    names = {x["name"] for x in doc["templating"]["list"]}
    for side in ("a_", "b_"):
        assert {side + name for name, _, _ in FLEET_FILTERS} <= names
    for panel in _panels(doc):
        for t in panel.get("targets") or []:
            legend = t.get("legendFormat", "")
            if legend.startswith("A"):
                assert "$b_" not in t["expr"]
            if legend.startswith("B") and "−" not in legend:
                assert "$a_" not in t["expr"]


def test_compare_shows_every_phase_p50_and_p95_side_by_side_with_the_difference():
    panel = next(p for p in _panels(DASHBOARDS[fleet_compare.UID]) if p["title"] == "Phase durations: A vs B")
    renames = panel["transformations"][1]["options"]["renameByName"]
    assert sorted(renames.values()) == sorted(["A p50", "B p50", "B − A p50", "A p95", "B p95", "B − A p95"])
    assert panel["transformations"][0]["id"] == "merge"
    for t in panel["targets"]:
        assert t["format"] == "table" and t["instant"]


def test_one_start_has_traceql_search_trace_view_and_fingerprint():
    doc = DASHBOARDS[one_start.UID]
    types = [(p["type"], p.get("datasource", {}).get("type")) for p in _panels(doc)]
    assert ("table", "tempo") in types and ("traces", "tempo") in types
    titles = {p["title"] for p in _panels(doc)}
    assert {"CPU cores busy", "Resident memory", "GPU memory", "Disk read"} <= titles
    tempo_queries = [t["query"] for p in _panels(doc) for t in p.get("targets") or [] if t.get("queryType")]
    assert one_start.SLOW_STARTS in tempo_queries and "$trace_id" in tempo_queries


# --- schema v2 (dashboard.grafana.app/v2beta1) ------------------------------------------------------------

DASHBOARDS_V2 = generate.dashboards_v2()


@pytest.fixture(scope="module")
def validator_v2() -> jsonschema.Draft7Validator:
    schema = json.loads(fleet_tools.data_file(fleet_tools.GRAFANA_SCHEMA_V2).read_text())
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_v2_dashboard_validates_against_grafana_schema(uid, validator_v2):
    """The v2 form's spec against @grafana/schema's v2beta1 ``Spec`` type (additionalProperties false)."""
    doc = DASHBOARDS_V2[uid]
    assert doc["apiVersion"] == "dashboard.grafana.app/v2beta1" and doc["kind"] == "Dashboard"
    assert doc["metadata"] == {"name": uid}
    errors = [f"{e.json_path}: {e.message[:200]}" for e in validator_v2.iter_errors(doc["spec"])]
    assert not errors, errors
    assert json.loads((generate.V2_DIR / f"{uid}.json").read_text()) == doc


def test_v2_schema_rejects_a_broken_dashboard(validator_v2):
    broken = copy.deepcopy(DASHBOARDS_V2[fleet_overview.UID]["spec"])
    broken["titel"] = "typo"
    broken["cursorSync"] = "Sometimes"
    element = next(iter(broken["elements"].values()))
    element["spec"]["vizConfig"]["spec"]["fieldConfig"]["defaults"]["unitt"] = "s"
    broken["layout"]["spec"]["rows"][0]["spec"]["layout"]["spec"]["items"][0]["spec"]["width"] = "six"
    messages = " ".join(e.message for e in validator_v2.iter_errors(broken))
    for wanted in ("titel", "'Sometimes'", "unitt", "'six'"):
        assert wanted in messages, (wanted, messages[:2000])


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_v2_form_holds_every_panel_query_variable_and_position_of_v1(uid):
    v1, v2 = DASHBOARDS[uid], DASHBOARDS_V2[uid]["spec"]
    panels = [p for p in _panels(v1) if p["type"] != "row"]
    assert len(v2["elements"]) == len(panels)
    placed = {}
    for row, v1_row in zip(v2["layout"]["spec"]["rows"], [p for p in v1["panels"] if p["type"] == "row"],
                           strict=True):
        assert row["spec"]["title"] == v1_row["title"]
        for item in row["spec"]["layout"]["spec"]["items"]:
            placed[item["spec"]["element"]["name"]] = (item["spec"], v1_row["gridPos"]["y"] + 1)
    for p in panels:
        el = v2["elements"][f"panel-{p['id']}"]["spec"]
        assert el["title"] == p["title"] and el["vizConfig"]["group"] == p["type"]
        queries = el["data"]["spec"]["queries"]
        assert [q["spec"]["refId"] for q in queries] == [t["refId"] for t in p["targets"]]
        for q, t in zip(queries, p["targets"], strict=True):
            assert q["spec"]["query"]["group"] == t["datasource"]["type"]
            assert q["spec"]["query"]["datasource"] == {"name": t["datasource"]["uid"]}
            assert q["spec"]["query"]["spec"].get("expr") == t.get("expr")
        spec, y0 = placed[f"panel-{p['id']}"]
        g = p["gridPos"]
        assert (spec["x"], spec["y"] + y0, spec["width"], spec["height"]) == (g["x"], g["y"], g["w"], g["h"])
    assert [x["spec"]["name"] for x in v2["variables"]] == [x["name"] for x in v1["templating"]["list"]]
