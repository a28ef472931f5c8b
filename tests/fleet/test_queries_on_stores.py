"""Every query a single ready start can answer returns data with its expected labels from both real stores —
VictoriaMetrics holding the OTLP-shaped series and Prometheus holding the scrape-shaped ones — on a synthetic
start (synthetic.py). The end-to-end proof repeats this after a real instrumented start; this catches a query
one engine does not take (MetricsQL and PromQL differ) before that.

The stores evaluate the mixin's recording rules (mixin/prometheus_rules.yaml, evaluated every second here instead
of every minute): Prometheus through rule_files, VictoriaMetrics through vmalert (from the same Debian package),
which writes the recorded series back into it. Queries that read recorded series must answer from them, and
answer exactly what the same query on the raw series answers."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import fleet_tools
import pytest
import synthetic
import yaml

from dashboards import generate, queries, recording

ANSWERABLE = [q for q in queries.all_queries() if q.needs <= {queries.CGROUP}]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback only
        return r.read()


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def _serve(cmd: list[str], ready_url: str) -> Iterator[None]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(ready_url, proc)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


def shipped_rules(path: Path, interval: str = "1s") -> Path:
    """The shipped recording rules, evaluated every ``interval`` (the expressions as shipped)."""
    groups = yaml.safe_load(generate.RULES.read_text())["groups"]
    path.write_text(yaml.safe_dump({"groups": [{**g, "interval": interval} for g in groups]}))
    return path


# The recordings a synthetic start feeds (it has no torch.compile run).
FED = {r.record for r in recording.RECORDINGS if r.source != queries.v.COMPILES}


def _wait_recorded(base: str, *, flush: bool = False, timeout: float = 30) -> set[str]:
    """Until the store holds the recorded series of every recording whose source series it holds (rules
    evaluated, results in); ``flush``: VictoriaMetrics, make freshly written rows searchable first."""
    sources = {r["metric"]["__name__"] for r in _query(base, 'count by (__name__) ({__name__=~"vllm_startup_.+"})')}
    wanted = {r.record for r in recording.RECORDINGS if r.source in sources}
    deadline = time.monotonic() + timeout
    while True:
        if flush:
            _get(f"{base}/internal/force_flush")
        recorded = f'{{__name__=~"({"|".join(recording.LEVELS)}):.+"}}'
        have = {r["metric"]["__name__"] for r in _query(base, f"count by (__name__) ({recorded})")}
        if have >= wanted:
            return wanted
        if time.monotonic() > deadline:
            raise TimeoutError(f"recorded series missing after {timeout}s: {sorted(wanted - have)}")
        time.sleep(0.5)


def vmalert(base: str, work: Path) -> Iterator[None]:
    """vmalert evaluating the shipped recording rules over the VictoriaMetrics at ``base``, writing the results
    back into it; yields once every recording fed by the stored series is in. ``work``: a directory for its
    rules file (not the store's data directory)."""
    port = _free_port()
    cmd = [fleet_tools.tool("vmalert"), f"-rule={shipped_rules(work / 'rules.yaml')}", f"-datasource.url={base}",
           f"-remoteWrite.url={base}", "-rule.evalDelay=0s", "-remoteWrite.flushInterval=500ms",
           f"-httpListenAddr=127.0.0.1:{port}"]
    for _ in _serve(cmd, f"http://127.0.0.1:{port}/-/ready"):
        _wait_recorded(base, flush=True)
        yield


@pytest.fixture(scope="module")
def victoriametrics(tmp_path_factory) -> Iterator[str]:
    work, port = tmp_path_factory.mktemp("vm"), _free_port()
    rules_dir = tmp_path_factory.mktemp("vmalert")
    base = f"http://127.0.0.1:{port}"
    cmd = [fleet_tools.tool("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={work}",
           "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s"]
    for _ in _serve(cmd, f"{base}/health"):
        now = int(time.time())
        body = synthetic.exposition(synthetic.otlp(), now - 300, now, openmetrics=False).encode()
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/v1/import/prometheus", data=body), timeout=10)
        _get(f"{base}/internal/force_flush")
        for _ in vmalert(base, rules_dir):
            yield base


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[str]:
    work, port = tmp_path_factory.mktemp("prom"), _free_port()
    now = int(time.time())
    (work / "series.om").write_text(synthetic.exposition(synthetic.scrape(), now - 300, now, openmetrics=True))
    r = fleet_tools.run(fleet_tools.tool("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                        str(work / "series.om"), str(work / "data"))
    assert r.returncode == 0, r.stderr
    rules = shipped_rules(work / "rules.yaml")
    (work / "prometheus.yml").write_text(f"global:\n  scrape_interval: 15s\n  evaluation_interval: 1s\n"
                                         f"rule_files: [{rules}]\n")
    cmd = [fleet_tools.tool("prometheus"), f"--config.file={work / 'prometheus.yml'}",
           f"--storage.tsdb.path={work / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}"]
    for _ in _serve(cmd, f"http://127.0.0.1:{port}/-/ready"):
        assert _wait_recorded(f"http://127.0.0.1:{port}") == FED
        RECORDED_AT[f"http://127.0.0.1:{port}"] = time.time()
        yield f"http://127.0.0.1:{port}"


# When every recording of a store was in: a rule group evaluates again 4 minutes later, rule by rule, and a query
# racing that evaluation (a slow host's fleet tier) saw the count's second sample and not yet the sum's (a mean of
# 27.5 against 55.0); asked at this instant, the recorded side holds exactly the first evaluation.
RECORDED_AT: dict[str, float] = {}


def _query(base: str, expr: str, at: float | None = None) -> list[dict]:
    params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
    doc = json.loads(_get(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"))
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def _assert_answers(base: str, q: queries.Query) -> None:
    result = _query(base, q.expr)
    assert result, f"{q.source}: no data\n{q.expr}"
    for series in result:
        present = {k for k, val in series["metric"].items() if val}
        assert q.labels <= present, f"{q.source}: {sorted(q.labels - present)} missing in {series['metric']}"


@pytest.mark.parametrize("query", [q for q in ANSWERABLE if queries.OTLP in q.paths], ids=lambda q: q.source)
def test_query_answers_from_victoriametrics_fed_over_otlp(query, victoriametrics):
    _assert_answers(victoriametrics, query)


@pytest.mark.parametrize("query", [q for q in ANSWERABLE if queries.SCRAPE in q.paths], ids=lambda q: q.source)
def test_query_answers_from_prometheus_scraping_the_server(query, prometheus):
    _assert_answers(prometheus, query)


def _values(result: list[dict]) -> dict[tuple, float]:
    return {tuple(sorted((k, val) for k, val in r["metric"].items() if val)): float(r["value"][1]) for r in result}


RECORDED = [q for q in ANSWERABLE if q.recorded]


@pytest.mark.parametrize("query", [q for q in RECORDED if queries.OTLP in q.paths], ids=lambda q: q.source)
def test_recorded_query_equals_raw_query_on_victoriametrics(query, victoriametrics):
    recorded, raw = _values(_query(victoriametrics, query.expr)), _values(_query(victoriametrics, query.raw))
    assert recorded and recorded.keys() == raw.keys(), (recorded, raw)
    assert all(abs(recorded[k] - raw[k]) <= 1e-9 * max(1.0, abs(raw[k])) for k in raw), (recorded, raw)


@pytest.mark.parametrize("query", [q for q in RECORDED if queries.SCRAPE in q.paths], ids=lambda q: q.source)
def test_recorded_query_equals_raw_query_on_prometheus(query, prometheus):
    at = RECORDED_AT[prometheus]
    recorded, raw = _values(_query(prometheus, query.expr, at)), _values(_query(prometheus, query.raw, at))
    assert recorded and recorded.keys() == raw.keys(), (recorded, raw)
    assert all(abs(recorded[k] - raw[k]) <= 1e-9 * max(1.0, abs(raw[k])) for k in raw), (recorded, raw)


def test_recording_rules_ran_on_both_stores(victoriametrics, prometheus):
    """The recorded series are the rules' output: one per fleet key, no per-start labels."""
    assert len(RECORDED) >= 10
    for base in (victoriametrics, prometheus):
        for record in FED:
            series = _query(base, record)
            assert series, (base, record)
            for s in series:
                assert not {queries.v.POD, queries.v.TRACE_ID, queries.v.PROCESS_PID} & set(s["metric"]), s["metric"]


def test_a_start_before_the_window_is_not_counted(prometheus):
    (series,) = _query(prometheus, next(q.expr for q in ANSWERABLE if q.source.endswith("fleet/Starts/A")))
    assert series["value"][1] == "1"
    older = next(q.expr for q in ANSWERABLE if q.source.endswith("fleet/Starts/A")).replace("1h", "2m")
    assert _query(prometheus, older) == []  # the start's series began 5 minutes ago: not new in the last 2


def test_synthetic_series_use_the_vocabulary():
    allowed = queries.v.allowed_series()
    for name, labels, _ in synthetic.otlp() + synthetic.scrape():
        assert name in allowed and set(labels) <= allowed[name], (name, labels)


def test_stores_are_real_binaries():
    for name in ("victoria-metrics", "vmalert", "prometheus", "promtool"):
        assert Path(fleet_tools.tool(name)).exists()


def _samples_read(base: str, expr: str, start: float, end: float) -> tuple[int, list]:
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "1s", "stats": "all"}
    doc = json.loads(_get(f"{base}/api/v1/query_range?{urllib.parse.urlencode(params)}"))
    assert doc["status"] == "success" and doc["data"]["result"], doc
    return int(doc["data"]["stats"]["samples"]["totalQueryableSamples"]), doc["data"]["result"]


def test_a_per_hour_panel_reads_far_fewer_samples_from_the_recording(prometheus, capsys):
    """What the recording rules buy, counted by Prometheus (query stats, not a clock): the time-to-ready p95
    panel over 3 s (4 points) from the recorded series vs from the raw buckets, one synthetic start. The raw form
    reads every bucket sample of the 1h window (and of the hour before) at each point, the recorded form the
    latest recorded sample per bucket; with more starts, the raw form grows with the starts, the recorded one
    with the fleets."""
    q = next(x for x in RECORDED if x.source == "dashboard/vllm-startup-fleet/Time to ready p50 / p95 / p99/B")
    time.sleep(3)  # the recorded series (evaluated every second since the fixture) span the whole range
    end = time.time()
    (recorded, a), (raw, b) = (_samples_read(prometheus, expr, end - 3, end) for expr in (q.expr, q.raw))
    assert [len(s["values"]) for s in a] == [len(s["values"]) for s in b] == [4]  # the same points answered
    with capsys.disabled():
        print(f"\n{q.source}, 4 points: {recorded} samples read from the recording, {raw} from the raw series")
    assert recorded * 10 < raw
