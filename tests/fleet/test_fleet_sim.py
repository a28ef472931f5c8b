"""The fleet simulator (support/fleet_sim.py, behind `python -m benchmarks fleet-scale`) at a small N: recorded
starts become distinct fleet starts, the agent's own metric code gives both paths the same startup series, and both
real stores take what it writes (the big-N measurement stays a benchmark: measure, don't time-test)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import fleet_tools
import pytest
import test_queries_on_stores as base

from support import fleet_sim as fs
from vllm_otel_startup import semconv as sc

END_S = 1_790_000_000


@pytest.fixture(scope="module")
def templates() -> list[fs.Template]:
    return fs.templates()


@pytest.fixture(scope="module")
def starts(templates) -> list[fs.SimStart]:
    return fs.plan(40, templates, end_s=END_S, window_s=86400, failed_share=0.2)


def _request(starts, **kw):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    req = ExportMetricsServiceRequest()
    req.ParseFromString(fs.otlp_request(starts, samples=2, interval_s=60, **kw))
    return req


def _attrs(kvs) -> dict[str, str]:
    return {kv.key: str(getattr(kv.value, kv.value.WhichOneof("value") or "string_value")) for kv in kvs}


def test_the_recorded_starts_are_the_templates(templates):
    names = {t.name for t in templates}
    assert {"dev/bad-model", "gpu/h100-llama8b-compiled-cold", "corpus/l8-h1024-eager-warm"} <= names
    assert {t.outcome for t in templates} == {"ready", "failed"}


def test_the_plan_is_a_fleet(starts):
    assert starts == fs.plan(40, fs.templates(), end_s=END_S, window_s=86400, failed_share=0.2)  # reproducible
    assert [s.ready_s for s in starts] == sorted(s.ready_s for s in starts)
    assert all(END_S - 86400 < s.ready_s <= END_S for s in starts)
    assert len({s.pod for s in starts}) > 10 and len({s.model for s in starts}) > 5
    assert {s.template.gpu for s in starts} == {True, False}
    assert any(s.template.outcome == "failed" for s in starts)


def test_each_start_has_its_own_trace_processes_and_identity(starts):
    seen_traces, seen_pids = set(), set()
    for s in starts[:6]:
        spans = fs.spans_of(s)
        assert len({x.trace_id for x in spans}) == 1
        seen_traces |= {spans[0].trace_id}
        procs = fs.processes(spans)
        assert len(procs) == len({x.resource["service.instance.id"] for x in s.template.spans})
        seen_pids |= {own[0].resource["process.pid"] for own in procs.values()}
        assert all(x.resource["k8s.pod.name"] == s.pod and x.resource["host.name"] == s.node for x in spans)
        assert max(x.end for x in spans) == s.ready_s * 10**9
    assert len(seen_traces) == 6 and len(seen_pids) >= 6


def test_otlp_is_the_agents_metrics_with_the_fleet_identity(starts):
    s = next(x for x in starts if x.template.outcome == "ready")
    req = _request([s])
    kinds = {_attrs(rm.resource.attributes)[sc.PROCESS_KIND] for rm in req.resource_metrics}
    assert sc.PROCESS_KIND and "api_server" in kinds
    names = set()
    for rm in req.resource_metrics:
        res = _attrs(rm.resource.attributes)
        assert res["k8s.pod.name"] == s.pod and res["k8s.cluster.name"] == s.cluster
        for m in (m for sm in rm.scope_metrics for m in sm.metrics):
            names.add(m.name)
            points = fs._points(m)
            assert sorted({p.time_unix_nano for p in points}) == [s.ready_s * 10**9, (s.ready_s + 60) * 10**9]
            if m.name in sc.STARTUP_METRICS:
                assert not m.HasField("histogram")
                fleet = _attrs(points[0].attributes)
                assert fleet[sc.MODEL] == s.model and fleet[sc.VLLM_VERSION] == s.version
    assert names <= set(sc.STARTUP_METRICS) | set(sc.RESOURCE_METRICS)
    assert {"vllm.startup.starts", "vllm.startup.phase.last_duration", "process.cpu.time"} <= names


def test_a_failed_start_reports_over_otlp_only(starts):
    s = next(x for x in starts if x.template.outcome == "failed")
    req = _request([s])
    outcomes = {_attrs(p.attributes).get(sc.OUTCOME) for rm in req.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.name == "vllm.startup.starts" for p in fs._points(m)}
    assert outcomes == {"failed"}
    assert list(fs.scrape_samples(s, samples=2, interval_s=60)) == []


def test_both_paths_carry_the_same_startup_series(starts):
    """The set of (metric, labels) of the startup metrics is the same over OTLP and on /metrics (ready.py and
    prometheus.py derive them alike): the simulator feeds both from one start."""
    s = next(x for x in starts if x.template.outcome == "ready" and x.template.gpu)
    otlp = set()
    for rm in _request([s]).resource_metrics:
        for m in (m for sm in rm.scope_metrics for m in sm.metrics if m.name in sc.STARTUP_METRICS):
            for p in fs._points(m):
                labels = _attrs(p.attributes)
                otlp.add((sc.prom_name(m.name).removesuffix("_total"), frozenset(map(sc.prom_label, labels)),
                          tuple(sorted(labels.values()))))
    scrape = set()
    target = fs.target_labels(s)
    for name, line in fs.scrape_samples(s, samples=1, interval_s=60):
        body = line[line.index("{") + 1:line.rindex("}")]
        labels = dict(kv.split("=", 1) for kv in body.split('",') if kv)
        labels = {k: v.strip('"') for k, v in labels.items() if k not in target}
        scrape.add((name.removesuffix("_total"), frozenset(labels), tuple(sorted(labels.values()))))
    assert otlp == scrape


def _victoriametrics_holding(starts, tmp_path) -> Iterator[str]:
    """A real VictoriaMetrics (its URL) holding ``starts`` as the simulator posts them over OTLP."""
    port = base._free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [fleet_tools.tool("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}",
           f"-storageDataPath={tmp_path / 'vm'}",
           "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s", "-retentionPeriod=100y"]
    for _ in base._serve(cmd, f"{url}/health"):
        body = fs.otlp_request(starts, samples=2, interval_s=60)
        urllib.request.urlopen(urllib.request.Request(f"{url}/opentelemetry/v1/metrics", data=body,  # noqa: S310
                                                      headers={"Content-Type": "application/x-protobuf"}), timeout=60)
        base._get(f"{url}/internal/force_flush")
        time.sleep(0.5)
        yield url


def test_both_stores_take_the_simulated_fleet(starts, tmp_path):
    few = starts[:6]
    ready = sum(s.template.outcome == "ready" for s in few)
    query = {"query": "count(last_over_time(vllm_startup_starts_total[2d]))", "time": str(END_S + 120)}
    for url in _victoriametrics_holding(few, tmp_path):
        res = json.loads(base._get(f"{url}/api/v1/query?{urllib.parse.urlencode(query)}"))["data"]["result"]
        assert int(res[0]["value"][1]) == len(few)  # failed starts too: one starts series per start
    om = tmp_path / "scrapes.om"
    assert fs.openmetrics_file(few, om, samples=2, interval_s=60) > 0
    r = subprocess.run([fleet_tools.tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(om),
                        str(tmp_path / "prom")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-1000:]
    (tmp_path / "prom" / "wal").mkdir()  # dump opens the database, WAL included
    r = subprocess.run([fleet_tools.tool("promtool"), "tsdb", "dump", "--match=vllm_startup_starts_total",
                        f"--sandbox-dir-root={tmp_path}", str(tmp_path / "prom")],
                       capture_output=True, text=True, timeout=120)
    assert len({line.split("}")[0] for line in r.stdout.splitlines() if line}) == ready


def _otlp_series(req) -> int:
    """Series a store makes of the request (each series is at two times: ``_request``)."""
    return sum(1 for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
               for _ in fs._points(m)) // 2


def test_every_recorded_start_costs_at_most_100_series_on_each_path(templates):
    """Issue 18's budget: every recorded start (CPU, H100 and H200, failed), with its whole resource (process
    identity included), <= 100 series per EngineCore over OTLP and on /metrics, 40 more for each process beyond an
    EngineCore's API server and worker (fs.series_budget: a tensor-parallel rank's worker); one series per phase and
    process kind."""
    for t in templates:
        s = dataclasses.replace(fs.plan(1, templates, end_s=END_S)[0], template=t)
        otlp = _otlp_series(_request([s]))
        scrape = sum(1 for _ in fs.scrape_samples(s, samples=1, interval_s=60))
        phases = {(x.attrs[sc.PHASE], x.attrs[sc.PROCESS_KIND]) for x in t.spans
                  if x.attrs.get(sc.PHASE) in sc.METRIC_PHASES}
        engines = max(1, sum(x.name == sc.ENGINE_CORE_PROCESS_SPAN for x in t.spans))  # data parallel: several
        workers = sum(x.name == sc.WORKER_PROCESS_SPAN for x in t.spans)
        apis = sum(x.name == sc.API_SERVER_PROCESS_SPAN for x in t.spans)  # several API servers: one span each
        budget = fs.series_budget(engines, workers, max(1, apis))
        assert otlp <= budget and scrape <= 100 * engines, (t.name, engines, workers, otlp, scrape, budget)
        if t.outcome == "ready":
            assert len(phases) < scrape <= otlp, (t.name, len(phases), scrape, otlp)


def test_reused_requests_are_the_ones_the_agents_code_makes(starts):
    """The script's fast path (one SDK run per template, model, version and scale; identity written over it)
    gives byte for byte what running the agent's code for each start gives."""
    first = next(x for x in starts if x.template.gpu)
    others = [dataclasses.replace(first, index=first.index + k, pod=f"{first.pod}-{k}", node=f"node-x{k}",
                                  ready_s=first.ready_s - 60 * k) for k in (1, 2)]
    fs.otlp_request([first], samples=2, interval_s=60)  # made once, kept
    for s in others:
        reused = fs.otlp_request([s], samples=2, interval_s=60)
        made = fs.otlp_request([s], samples=2, interval_s=60, reuse=False)
        assert _strip_own_readings(reused) == _strip_own_readings(made)


def test_the_recorded_series_it_computes_are_what_the_rules_record(templates, tmp_path):
    """At the big N the recording rules' output is computed (fleet_sim.recorded_series), not evaluated minute by
    minute for a week: here each recording's expression, evaluated by VictoriaMetrics over the simulated fleet's
    series at several times, gives exactly the computed values."""
    from dashboards import recording

    few = fs.plan(60, templates, end_s=END_S, window_s=3 * 3600, failed_share=0.1)
    times = [t - t % 60 for t in (END_S - 7200, END_S - 3600 + 300, END_S + 60)]  # evaluation times: whole minutes
    checked = 0
    for url in _victoriametrics_holding(few, tmp_path):
        for rec in recording.RECORDINGS:
            computed = {}
            for labels, ts, values in fs.recorded_series(few, rec, interval_s=60, first_s=END_S - 4 * 3600,
                                                         last_s=END_S + 120):
                key = tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))
                for t, value in zip(ts, values, strict=True):
                    computed[(t, key)] = value
            for t in times:
                q = {"query": rec.expr, "time": str(t), "nocache": "1"}
                res = json.loads(base._get(f"{url}/api/v1/query?{urllib.parse.urlencode(q)}"))["data"]["result"]
                store = {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in res}
                mine = {key: value for (tt, key), value in computed.items() if tt == t}
                assert store.keys() == mine.keys(), (rec.record, t, sorted(store.keys() ^ mine.keys())[:3])
                assert all(abs(store[k] - mine[k]) <= 1e-6 * max(1.0, abs(mine[k])) for k in mine), rec.record
                checked += len(mine)
    assert checked > 500


def _strip_own_readings(body: bytes):
    """The request less the simulator's own process readings (process.cpu.time etc. read this test process)."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    req = ExportMetricsServiceRequest.FromString(body)
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            keep = [m for m in sm.metrics if m.name in sc.STARTUP_METRICS]
            del sm.metrics[:]
            sm.metrics.extend(keep)
    return req.SerializeToString(deterministic=True)
