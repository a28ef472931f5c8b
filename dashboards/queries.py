"""Every PromQL query of every dashboard panel and alert rule, made concrete, for the proof against real data.

    from dashboards.queries import all_queries
    for query in all_queries():
        if query.needs <= what_this_run_has and store_path in query.paths:
            result = prometheus_api_query(query.expr)      # instant query, at "now"
            assert result and every series carries query.labels (non-empty)

Substitutions (``SUBSTITUTIONS``): Grafana's windows become fixed durations — ``$__range`` -> ``1h`` (a start of the
last hour is in range), ``$__interval`` -> ``1h`` (the stacked panel's minimum interval), ``$__rate_interval`` ->
``5m``; every template variable (fleet selections ``$cluster``, ``$a_model``, ..., ``$phase``, ``$pod``,
``$trace_id``) becomes ``.*``, i.e. All. Alert rules are taken as generated (no variables).

``labels``: the labels every result series must carry with a non-empty value, inferred from the query's own
grouping (promql_ast.output_labels), minus, on queries of the per-start series, its cause labels, which are
legitimately empty when a start skipped that phase (vocabulary.MAY_BE_EMPTY). They include the ``k8s_*``
identity labels a query groups by: give the start a Kubernetes identity (``K8S_CLUSTER_NAME``,
``K8S_NAMESPACE_NAME``, ``K8S_POD_NAME``, ``K8S_NODE_NAME`` in its environment, the same names as static target
labels on the Prometheus scrape job, as deploy/ does through relabelling).

``needs``: what the query needs besides one instrumented ready start, or it rightly returns nothing:
``kube_state_metrics`` (KSM series), ``gpu`` (NVML ``hw_*`` series), ``cgroup`` (cgroup v2 cpu.stat),
``failed_start`` (a start that failed before ready), ``compile`` (a torch.compile'd, non-eager start),
``compile_cache_miss``, ``compile_key`` (the compile span carries vLLM's cache key), ``hub_download`` (weights
fetched from the hub during the start), ``history`` (starts older than the alert's recent window, up to days),
``firing`` (a full alert expression: data only while the alert fires; its ``checks`` are listed separately as
``alert/<name>/<check>`` and return data on their own).

``paths``: the ingest paths whose store can answer: ``otlp`` (VictoriaMetrics fed over OTLP) and ``scrape``
(Prometheus scraping vLLM's /metrics, which has no resource fingerprint and no failed starts; kube-state-metrics
series are scraped too).

``recorded``: the recording rules' series the query reads (recording.py; the store must evaluate
mixin/prometheus_rules.yaml: Prometheus rule_files, vmalert over VictoriaMetrics); ``raw``: the same query with
every recording replaced by the raw series it is computed from (== ``expr`` when ``recorded`` is empty). Both
answer alike: the proof on the stores compares them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from vllm_otel_startup import semconv as sc

from . import alerts as al
from . import generate, recording
from . import promql_ast as ast
from . import vocabulary as v

SUBSTITUTIONS: dict[str, str] = {"__range": "1h", "__interval": "1h", "__rate_interval": "5m"}
ALL = ".*"
OTLP, SCRAPE = "otlp", "scrape"
CGROUP = "cgroup"
COMPILE_KEY = "compile_key"  # a start whose torch.compile span carries vLLM's cache key (vLLM >= 0.18 here)
RANKS = "ranks"  # a start with several workers per EngineCore (tensor / pipeline parallel): its rank waits
NEEDS = frozenset({al.KSM, al.GPU, CGROUP, COMPILE_KEY, RANKS, al.FAILED_START, al.COMPILE, al.COMPILE_MISS,
                   al.HUB_DOWNLOAD, al.HISTORY, al.FIRING, al.STARTING})

_VAR = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
_RESOURCE = {sc.prom_name(m) for m in sc.RESOURCE_METRICS}


@dataclass(frozen=True)
class Query:
    source: str  # "dashboard/<uid>/<panel title>/<refId>", "alert/<name>" or "alert/<name>/<check>"
    expr: str  # concrete PromQL
    labels: frozenset[str]  # every result series carries these, non-empty
    needs: frozenset[str]  # inputs besides one ready start (module docstring)
    paths: frozenset[str]  # ingest paths whose store can answer
    template: str  # the expression as the dashboard or rule has it
    raw: str = ""  # the concrete query on raw series only (module docstring)

    @property
    def recorded(self) -> frozenset[str]:
        return frozenset(ast.used(self.expr).series & set(recording.BY_RECORD))


def substitute(expr: str, variables: set[str]) -> str:
    """Grafana variables -> concrete values (module docstring); an unknown variable is an error."""

    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name in SUBSTITUTIONS:
            return SUBSTITUTIONS[name]
        if name in variables:
            return ALL
        raise KeyError(f"unknown template variable ${name} in {expr}")

    return _VAR.sub(value, expr)


def derived_needs(expr: str) -> tuple[frozenset[str], frozenset[str]]:
    """(needs, paths) a query's series and matchers imply."""
    u = ast.used(expr)
    series = recording.sources(u.series)
    needs, paths = set(), {OTLP, SCRAPE}
    if series & _RESOURCE:
        paths = {OTLP}
    if series & {v.GPU_MEMORY_USAGE, v.GPU_MEMORY_LIMIT, v.GPU_UTILIZATION}:
        needs.add(al.GPU)
    if v.CGROUP_THROTTLED in series:
        needs.add(CGROUP)
    if series & set(v.KSM_SERIES):
        needs.add(al.KSM)
        paths = {SCRAPE}  # Prometheus scraping kube-state-metrics
    if series & {v.COMPILES, v.COMPILE_KEYS}:
        needs.add(al.COMPILE)
    if v.COMPILE_KEYS in series:
        needs.add(COMPILE_KEY)
    if v.RANK_WAIT in series:
        needs.add(RANKS)
    if series & v.IN_PROGRESS:
        needs.add(al.STARTING)
    for _series, lbl, op, value in u.matchers:
        if op != "Equal":
            continue
        if (lbl, value) == (v.OUTCOME, v.FAILED):
            needs.add(al.FAILED_START)
            paths = {OTLP}
        elif (lbl, value) == (v.COMPILE_CACHE_HIT, v.FALSE):
            needs.update({al.COMPILE, al.COMPILE_MISS})
        elif (lbl, value) == (v.WEIGHTS_SOURCE, v.HUB_DOWNLOAD):
            needs.add(al.HUB_DOWNLOAD)
    return frozenset(needs), frozenset(paths)


def expected_labels(expr: str) -> frozenset[str]:
    out = ast.output_labels(expr)
    if out is None:
        raise ValueError(f"query does not promise a label set (aggregate it): {expr}")
    if v.LAST_START in recording.sources(ast.used(expr).series):
        out -= v.MAY_BE_EMPTY  # the per-start series' cause labels (empty when the start skipped the phase)
    return frozenset(out)


def _query(source: str, template: str, expr: str, extra_needs: frozenset[str] = frozenset()) -> Query:
    needs, paths = derived_needs(expr)
    return Query(source, expr, expected_labels(expr), needs | extra_needs, paths, template)


def walk_panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels") or [])


def dashboard_queries(recorded: bool = True) -> Iterator[Query]:
    for uid, doc in generate.dashboards(recorded).items():
        variables = {var["name"] for var in doc.get("templating", {}).get("list", [])}
        for panel in walk_panels(doc.get("panels", [])):
            for t in panel.get("targets") or []:
                if (t.get("datasource") or panel.get("datasource") or {}).get("type") != "prometheus":
                    continue
                yield _query(f"dashboard/{uid}/{panel['title']}/{t['refId']}", t["expr"],
                             substitute(t["expr"], variables))


def alert_queries(budgets: al.Budgets | None = None) -> Iterator[Query]:
    for a in al.alerts(budgets):
        yield _query(f"alert/{a.name}", a.expr, a.expr, frozenset({al.FIRING}) | a.needs)
        for c in a.checks:
            yield _query(f"alert/{a.name}/{c.name}", c.expr, c.expr, c.needs)


def all_queries() -> list[Query]:
    """Every PromQL expression of every dashboard panel and alert rule (module docstring)."""
    with recording.raw_queries():
        raw = {q.source: q.expr for q in [*dashboard_queries(recorded=False), *alert_queries()]}
    return [dataclasses.replace(q, raw=raw[q.source]) for q in [*dashboard_queries(), *alert_queries()]]


def variable_queries() -> Iterator[tuple[str, str]]:
    """(source, ``label_values(...)`` query) of every dashboard template variable backed by Prometheus."""
    for uid, doc in generate.dashboards().items():
        for var in doc.get("templating", {}).get("list", []):
            if var.get("type") == "query":
                yield f"dashboard/{uid}/${var['name']}", var["query"]
