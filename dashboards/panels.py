"""Thin helpers over grafana-foundation-sdk builders: datasource variables, Prometheus / Tempo targets and the
few panel shapes the dashboards use. Datasources are always template variables, never fixed uids, so the
dashboards import into any Grafana 11."""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import barchart, bargauge, stat, table, tempo, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as pb
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

PROM_VAR, TEMPO_VAR = "datasource", "tempo"
PROM = dm.DataSourceRef(type_val="prometheus", uid="${" + PROM_VAR + "}")
TEMPO = dm.DataSourceRef(type_val="tempo", uid="${" + TEMPO_VAR + "}")
ALL = dm.VariableOption(selected=True, text="All", value="$__all")


def datasource_variable(name: str, plugin: str, label: str) -> db.DatasourceVariable:
    return db.DatasourceVariable(name).label(label).type(plugin)


def prometheus_variable() -> db.DatasourceVariable:
    return datasource_variable(PROM_VAR, "prometheus", "Metrics (Prometheus / VictoriaMetrics)")


def tempo_variable() -> db.DatasourceVariable:
    return datasource_variable(TEMPO_VAR, "tempo", "Traces (Tempo)")


def label_variable(name: str, label: str, metric_selector: str, label_name: str) -> db.QueryVariable:
    """A multi-select of a label's values (All = ``.*``, which also matches series without the label)."""
    return (db.QueryVariable(name).label(label).datasource(PROM)
            .query(f"label_values({metric_selector}, {label_name})")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*").current(ALL))


def target(expr: str, ref: str, legend: str = "", *, instant: bool = False, table_format: bool = False,
           exemplar: bool = False) -> pb.Dataquery:
    t = pb.Dataquery().expr(expr).ref_id(ref).datasource(PROM)
    if exemplar:  # the counters' exemplars (the start's trace_id): Grafana draws them, a click opens the trace
        t = t.exemplar(True)
    if legend:
        t = t.legend_format(legend)
    t = t.instant() if instant else t.range()
    if table_format:
        t = t.format(pm.PromQueryFormat.TABLE)
    return t


def traceql(query: str, ref: str = "A", *, limit: int = 20) -> tempo.TempoQuery:
    return (tempo.TempoQuery().query_type("traceql").query(query).ref_id(ref).datasource(TEMPO).limit(limit)
            .table_type("traces"))


def _refs(targets: Sequence[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(expr, chr(ord("A") + i), legend) for i, (expr, legend) in enumerate(targets)]


def timeseries_panel(title: str, description: str, targets: Sequence[tuple[str, str]], unit: str, *,
                     w: int = 12, h: int = 8, stacked_bars: bool = False, interval: str = "", exemplars: bool = False,
                     ) -> timeseries.Panel:
    """``targets``: (expr, legend) pairs."""
    p = (timeseries.Panel().title(title).description(description).datasource(PROM).unit(unit).span(w).height(h)
         .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.TABLE)
                 .placement(cm.LegendPlacement.RIGHT).calcs(["mean", "max"])))
    for expr, ref, legend in _refs(targets):
        p = p.with_target(target(expr, ref, legend, exemplar=exemplars))
    if stacked_bars:
        p = (p.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(80)
             .stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL)))
    if interval:
        p = p.interval(interval)
    return p


def stat_panel(title: str, description: str, targets: Sequence[tuple[str, str]], unit: str, *, w: int = 6,
               h: int = 4, decimals: int | None = None) -> stat.Panel:
    p = (stat.Panel().title(title).description(description).datasource(PROM).unit(unit).span(w).height(h)
         .graph_mode(cm.BigValueGraphMode.NONE).text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
         .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))
    if decimals is not None:
        p = p.decimals(decimals)
    for expr, ref, legend in _refs(targets):
        p = p.with_target(target(expr, ref, legend, instant=True))
    return p


def bargauge_panel(title: str, description: str, targets: Sequence[tuple[str, str]], unit: str, *,
                   w: int = 8, h: int = 8, max_value: float | None = None) -> bargauge.Panel:
    p = (bargauge.Panel().title(title).description(description).datasource(PROM).unit(unit).span(w).height(h)
         .orientation(cm.VizOrientation.HORIZONTAL).display_mode(cm.BarGaugeDisplayMode.BASIC)
         .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)).min(0))
    if max_value is not None:
        p = p.max(max_value)
    for expr, ref, legend in _refs(targets):
        p = p.with_target(target(expr, ref, legend, instant=True))
    return p


def table_panel(title: str, description: str, targets: Sequence[tuple[str, str]], *, w: int = 24, h: int = 10,
                transformations: Sequence[dm.DataTransformerConfig] = ()) -> table.Panel:
    p = table.Panel().title(title).description(description).datasource(PROM).span(w).height(h)
    for expr, ref, legend in _refs(targets):
        p = p.with_target(target(expr, ref, legend, instant=True, table_format=True))
    for t in transformations:
        p = p.with_transformation(t)
    return p


def barchart_panel(title: str, description: str, targets: Sequence[tuple[str, str]], unit: str, x_field: str, *,
                   w: int = 24, h: int = 9, transformations: Sequence[dm.DataTransformerConfig] = ()
                   ) -> barchart.Panel:
    p = (barchart.Panel().title(title).description(description).datasource(PROM).unit(unit).span(w).height(h)
         .x_field(x_field).orientation(cm.VizOrientation.HORIZONTAL).show_value(cm.VisibilityMode.AUTO)
         .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
                 .placement(cm.LegendPlacement.BOTTOM)))
    for expr, ref, legend in _refs(targets):
        p = p.with_target(target(expr, ref, legend, instant=True, table_format=True))
    for t in transformations:
        p = p.with_transformation(t)
    return p


def transformation(id_: str, options: dict) -> dm.DataTransformerConfig:
    return dm.DataTransformerConfig(id_val=id_, options=options)


def merge_columns(renames: dict[str, str], exclude: Sequence[str] = ("Time",)) -> list[dm.DataTransformerConfig]:
    """Instant table queries side by side: merge on their common labels, rename ``Value #<ref>`` columns."""
    return [transformation("merge", {}),
            transformation("organize", {"excludeByName": {name: True for name in exclude},
                                        "renameByName": renames, "indexByName": {}})]


def link(title: str, url: str) -> db.DashboardLink:
    return db.DashboardLink(title).type(dm.DashboardLinkType.LINK).url(url).target_blank(False).tooltip(title)


def row(title: str) -> db.Row:
    return db.Row(title)
