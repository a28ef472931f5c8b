"""The status endpoint's ``/metrics`` written by prometheus-client (agent/live/status_server.py): the same series,
byte for byte, as the hand-written exposition it replaced (kept below as the reference), readable by
prometheus-client's own parsers, and OpenMetrics when the scraper asks for it."""

from __future__ import annotations

import math
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.live import status_server

FLEET = {sc.MODEL: 'org/model "q"\\x\nnext', sc.VLLM_VERSION: "0.32.0", sc.DEVICE: "cpu"}
SERIES = [
    ("vllm.startup.in_progress.elapsed", 12.5, {**FLEET, sc.PROCESS_KIND: "api_server", sc.TRACE_ID: "ab" * 16}),
    ("vllm.startup.in_progress.phase_elapsed", 3.0,
     {**FLEET, sc.PROCESS_KIND: "api_server", sc.TRACE_ID: "ab" * 16, sc.PHASE: "engine_wait"}),
    ("vllm.startup.in_progress.elapsed", 1234567.125, {**FLEET, sc.PROCESS_KIND: "engine_core",
                                                       sc.TRACE_ID: "ab" * 16}),
    ("vllm.startup.in_progress.phase_elapsed", 1e-05,
     {**FLEET, sc.PROCESS_KIND: "engine_core", sc.TRACE_ID: "ab" * 16, sc.PHASE: "torch_compile"}),
    ("vllm.startup.in_progress.remaining", math.nan, {**FLEET, sc.TRACE_ID: "ab" * 16}),
]


def hand_written(series: list[tuple[str, float, dict[str, str]]]) -> str:
    """The exposition the endpoint served before prometheus-client wrote it (status_server.py at d3076cb)."""
    def esc(v: str) -> str:
        return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    by_metric: dict[str, list[tuple[float, dict[str, str]]]] = {}
    for metric, value, labels in series:
        by_metric.setdefault(metric, []).append((value, labels))
    lines = []
    for metric, rows in by_metric.items():
        name = sc.prom_name(metric)
        lines.append(f"# HELP {name} {sc.METRICS[metric][3]}")
        lines.append(f"# TYPE {name} gauge")
        for value, labels in rows:
            body = ",".join(f'{sc.prom_label(k)}="{esc(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{body}}} {value if math.isfinite(value) else 'NaN'}")
    return "\n".join(lines) + "\n"


def _families(text: str) -> list[tuple]:
    return [(f.name, f.type, f.documentation, sorted((s.name, tuple(sorted(s.labels.items())), repr(s.value))
                                                     for s in f.samples)) for f in parse_text(text)]


def test_the_text_format_is_the_series_served_before():
    """The same families, HELP, TYPE, series, label values (escaped alike) and values as before; what differs is
    spelling only: each series' label order (prometheus-client sorts label names) and large numbers (Go's
    ``1.234567125e+06`` for ``1234567.125``): the same series and values to any Prometheus parser."""
    body, ctype = status_server.exposition(SERIES)
    assert ctype.startswith("text/plain; version=0.0.4")
    text, before = body.decode(), hand_written(SERIES)
    assert _families(text) == _families(before) and len(_families(text)) == 3
    lines, old = text.splitlines(), before.splitlines()
    assert [ln for ln in lines if ln.startswith("#")] == [ln for ln in old if ln.startswith("#")]
    spelled = {ln.rpartition(" ")[2] for ln in lines if not ln.startswith("#")}
    assert "1.234567125e+06" in spelled and "1234567.125" not in spelled  # Go's spelling, as Prometheus writes it
    assert status_server.exposition([]) == (b"", ctype)  # after ready: no series, an empty scrape


def test_prometheus_clients_parser_reads_every_series_back():
    body, _ = status_server.exposition(SERIES)
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in parse_text(body.decode()) for s in f.samples}
    want = {(sc.prom_name(m), tuple(sorted((sc.prom_label(k), v) for k, v in lbl.items()))): v for m, v, lbl in SERIES}
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == value or (math.isnan(value) and math.isnan(got[key])), key


def test_openmetrics_when_the_scraper_asks():
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    body, ctype = status_server.exposition(SERIES, accept)
    assert ctype.startswith("application/openmetrics-text") and body.decode().endswith("# EOF\n")
    fams = {f.name: f for f in parse_openmetrics(body.decode())}
    assert {f.type for f in fams.values()} == {"gauge"}
    assert len([s for f in fams.values() for s in f.samples]) == len(SERIES)


class _Live:
    def status(self) -> dict:
        return {"state": "starting"}

    def series(self) -> list:
        return SERIES


@pytest.mark.parametrize("accept", [None, "application/openmetrics-text; version=1.0.0"])
def test_the_endpoint_negotiates_the_format(accept):
    server = status_server.StatusServer(_Live(), "127.0.0.1", 0)
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{server.address[1]}/metrics",
                                     headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=5) as r:  # noqa: S310 - a local test server
            body, ctype = r.read(), r.headers["Content-Type"]
    finally:
        server.close()
    assert (body, ctype) == status_server.exposition(SERIES, accept)
