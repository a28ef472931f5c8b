"""The dashboards in Grafana's schema v2 (``dashboard.grafana.app/v2beta1``, what Grafana 12+ provisions and serves
from its dashboard API), converted from the schema v1 model the foundation SDK builds — one source, two forms.

The pinned grafana-foundation-sdk build (Grafana 11.6) has no v2 builders (only its unversioned "next" build has
``dashboardv2beta1``, with other v1 output), so the conversion is ours, after Grafana's own v1 -> v2 mapping:
panels become ``elements`` (``panel-<id>``) holding a QueryGroup (queries as DataQuery kinds named by datasource
type, the datasource by uid — here the template variables ``${datasource}`` / ``${tempo}``) and a VizConfig
(plugin id, options, field config); v1 rows and gridPos become a RowsLayout of GridLayouts (y relative to the
row); variables, links and time settings map field by field. The result validates against the v2beta1 ``Spec``
type of ``@grafana/schema`` (tests/fleet/test_dashboards.py; JSON Schema made by tests/fleet/bootstrap.sh).
"""

from __future__ import annotations

from typing import Any

API_VERSION = "dashboard.grafana.app/v2beta1"
QUERY_VERSION = "v0"
CURSOR_SYNC = {0: "Off", 1: "Crosshair", 2: "Tooltip"}
REFRESH = {0: "never", 1: "onDashboardLoad", 2: "onTimeRangeChanged"}
HIDE = {0: "dontHide", 1: "hideLabel", 2: "hideVariable"}
SORT = ("disabled", "alphabeticalAsc", "alphabeticalDesc", "numericalAsc", "numericalDesc",
        "alphabeticalCaseInsensitiveAsc", "alphabeticalCaseInsensitiveDesc", "naturalAsc", "naturalDesc")
AUTO_REFRESH_INTERVALS = ["5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d"]
# target keys that describe the query's place, not the query (they move to PanelQuery / DataQuery)
_TARGET_META = ("refId", "datasource", "hide")
# panel keys the conversion reads; any other key is an error (it would be lost silently)
_PANEL_KEYS = {"id", "type", "title", "description", "gridPos", "datasource", "targets", "transformations",
               "options", "fieldConfig", "transparent", "links", "interval", "maxDataPoints", "repeatDirection",
               "pluginVersion"}


def _query(ref: dict, spec: dict) -> dict:
    out: dict[str, Any] = {"kind": "DataQuery", "group": ref["type"], "version": QUERY_VERSION, "spec": spec}
    if ref.get("uid"):
        out["datasource"] = {"name": ref["uid"]}
    return out


def _option(current: dict | None) -> dict:
    current = current or {}
    out = {"text": current.get("text", ""), "value": current.get("value", "")}
    if "selected" in current:
        out["selected"] = current["selected"]
    return out


def _common(var: dict) -> dict:
    out = {"name": var["name"], "hide": HIDE[var.get("hide", 0)], "skipUrlSync": var.get("skipUrlSync", False)}
    for key in ("label", "description"):
        if var.get(key):
            out[key] = var[key]
    return out


def variable(var: dict) -> dict:
    """One v1 templating entry as a v2 VariableKind."""
    kind = var["type"]
    choice = {"multi": var.get("multi", False), "includeAll": var.get("includeAll", False),
              "allowCustomValue": var.get("allowCustomValue", True)}
    if var.get("allValue") is not None:
        choice["allValue"] = var["allValue"]
    if kind == "datasource":
        return {"kind": "DatasourceVariable", "spec": {
            **_common(var), **choice, "pluginId": var["query"], "refresh": REFRESH[var.get("refresh", 1)],
            "regex": var.get("regex", ""), "current": _option(var.get("current")), "options": []}}
    if kind == "query":
        return {"kind": "QueryVariable", "spec": {
            **_common(var), **choice, "current": _option(var.get("current")),
            "refresh": REFRESH[var.get("refresh", 1)],
            "query": _query(var["datasource"], {"__legacyStringValue": var["query"]}), "definition": var["query"],
            "regex": var.get("regex", ""), "sort": SORT[var.get("sort", 0)], "options": []}}
    if kind == "textbox":
        return {"kind": "TextVariable", "spec": {
            **_common(var), "current": _option(var.get("current")), "query": var.get("query", "")}}
    if kind == "custom":
        values = [x.strip() for x in var["query"].split(",")]
        return {"kind": "CustomVariable", "spec": {
            **_common(var), **choice, "query": var["query"], "current": _option(var.get("current")),
            "options": [{"text": x, "value": x} for x in values]}}
    raise ValueError(f"variable type {kind} has no v2 mapping here: add it")


def panel(p: dict) -> dict:
    """One v1 panel (not a row) as a v2 PanelKind."""
    unknown = set(p) - _PANEL_KEYS
    if unknown:
        raise ValueError(f"panel {p.get('title')!r}: keys {sorted(unknown)} have no v2 mapping here: add them")
    queries = []
    for t in p.get("targets") or []:
        ref = t.get("datasource") or p["datasource"]
        spec = {k: val for k, val in t.items() if k not in _TARGET_META}
        queries.append({"kind": "PanelQuery", "spec": {"query": _query(ref, spec), "refId": t["refId"],
                                                       "hidden": bool(t.get("hide", False))}})
    options = {k: p[k] for k in ("interval", "maxDataPoints") if p.get(k) is not None}
    transformations = [{"kind": t["id"], "spec": t} for t in p.get("transformations") or []]
    spec: dict[str, Any] = {
        "id": p["id"], "title": p["title"], "links": p.get("links") or [],
        "data": {"kind": "QueryGroup", "spec": {"queries": queries, "transformations": transformations,
                                                "queryOptions": options}},
        "vizConfig": {"kind": "VizConfig", "group": p["type"], "version": p.get("pluginVersion", ""),
                      "spec": {"options": p.get("options") or {},
                               "fieldConfig": p.get("fieldConfig") or {"defaults": {}, "overrides": []}}},
        "transparent": p.get("transparent", False)}
    if p.get("description"):
        spec["description"] = p["description"]
    return {"kind": "Panel", "spec": spec}


def _item(p: dict, y0: int) -> dict:
    g = p["gridPos"]
    return {"kind": "GridLayoutItem", "spec": {"x": g["x"], "y": g["y"] - y0, "width": g["w"], "height": g["h"],
                                               "element": {"kind": "ElementReference", "name": _name(p)}}}


def _name(p: dict) -> str:
    return f"panel-{p['id']}"


def layout(panels: list[dict]) -> dict:
    """v1 panels (rows and the panels under each) as a RowsLayout of GridLayouts, or one GridLayout."""
    if not any(p["type"] == "row" for p in panels):
        return {"kind": "GridLayout", "spec": {"items": [_item(p, 0) for p in panels]}}
    rows: list[dict] = []
    row_y = 0
    for p in panels:
        if p["type"] == "row":
            row_y = p["gridPos"]["y"] + 1
            rows.append({"kind": "RowsLayoutRow", "spec": {
                "title": p.get("title", ""), "collapse": p.get("collapsed", False),
                "layout": {"kind": "GridLayout", "spec": {"items": [_item(c, row_y) for c in p.get("panels", [])]}}}})
        else:
            if not rows:  # panels above the first row: a row without header
                rows.append({"kind": "RowsLayoutRow", "spec": {"hideHeader": True, "collapse": False, "layout": {
                    "kind": "GridLayout", "spec": {"items": []}}}})
            rows[-1]["spec"]["layout"]["spec"]["items"].append(_item(p, row_y))
    return {"kind": "RowsLayout", "spec": {"rows": rows}}


def _all_panels(panels: list[dict]) -> list[dict]:
    out = []
    for p in panels:
        if p["type"] == "row":
            out += p.get("panels", [])
        else:
            out.append(p)
    return out


def spec(doc: dict) -> dict:
    """A v1 dashboard JSON model as a v2beta1 ``Spec``."""
    out: dict[str, Any] = {
        "annotations": [], "cursorSync": CURSOR_SYNC[doc.get("graphTooltip", 0)],
        "editable": doc.get("editable", True),
        "elements": {_name(p): panel(p) for p in _all_panels(doc["panels"])},
        "layout": layout(doc["panels"]),
        "links": [{"url": "", **link} if link["type"] == "link" else link for link in doc.get("links", [])],
        "liveNow": False, "preload": False, "tags": doc.get("tags", []),
        "timeSettings": {"timezone": doc.get("timezone", "browser"), "from": doc["time"]["from"],
                         "to": doc["time"]["to"], "autoRefresh": doc.get("refresh") or "",
                         "autoRefreshIntervals": AUTO_REFRESH_INTERVALS, "hideTimepicker": False,
                         "fiscalYearStartMonth": doc.get("fiscalYearStartMonth", 0)},
        "title": doc["title"], "variables": [variable(x) for x in doc.get("templating", {}).get("list", [])]}
    if doc.get("description"):
        out["description"] = doc["description"]
    return out


def resource(doc: dict) -> dict:
    """The v2 dashboard as a Kubernetes-style resource (apiVersion, kind, metadata.name = the uid, spec), the form
    Grafana 12+'s dashboard API, file provisioning and Git Sync read."""
    return {"apiVersion": API_VERSION, "kind": "Dashboard", "metadata": {"name": doc["uid"]}, "spec": spec(doc)}
