"""Every query a single ready start can answer returns data with its expected labels from both real stores —
VictoriaMetrics holding the OTLP-shaped series and Prometheus holding the scrape-shaped ones — on a synthetic
start (synthetic.py). The end-to-end proof repeats this after a real instrumented start; this catches a query
one engine does not take (MetricsQL and PromQL differ) before that."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import synthetic
import tools

from dashboards import queries

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


@pytest.fixture(scope="module")
def victoriametrics(tmp_path_factory) -> Iterator[str]:
    work, port = tmp_path_factory.mktemp("vm"), _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [tools.tool("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={work}",
           "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s"]
    for _ in _serve(cmd, f"{base}/health"):
        now = int(time.time())
        body = synthetic.exposition(synthetic.otlp(), now - 300, now, openmetrics=False).encode()
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/v1/import/prometheus", data=body), timeout=10)
        _get(f"{base}/internal/force_flush")
        yield base


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[str]:
    work, port = tmp_path_factory.mktemp("prom"), _free_port()
    now = int(time.time())
    (work / "series.om").write_text(synthetic.exposition(synthetic.scrape(), now - 300, now, openmetrics=True))
    r = tools.run(tools.tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(work / "series.om"),
                  str(work / "data"))
    assert r.returncode == 0, r.stderr
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    cmd = [tools.tool("prometheus"), f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}"]
    for _ in _serve(cmd, f"http://127.0.0.1:{port}/-/ready"):
        yield f"http://127.0.0.1:{port}"


def _query(base: str, expr: str) -> list[dict]:
    doc = json.loads(_get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"))
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
    for name in ("victoria-metrics", "prometheus", "promtool"):
        assert Path(tools.tool(name)).exists()
