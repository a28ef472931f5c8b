"""``--jaeger URL`` / ``OTEL_PYTHON_VLLM_STARTUP_JAEGER_URL``: a start fetched from Jaeger v2's query API.

No Jaeger server installs here (it is a Go binary, not on PyPI, Debian or npm as a server), so the answer is
constructed: tests/data/jaeger/v3-compiled-warm.json.gz is ``dev/compiled-warm`` converted by
tools/jaeger_fixture.py into what ``GET /api/v3/traces/<id>`` returns, ``{"result": {"resourceSpans": ...}}``
in pdata's OTLP JSON (hex ids, integer enums, zero fields left out: the shape of Jaeger's own api_v3 snapshot
``GetTrace.json``), and a local http.server serves it, with Jaeger's JSON 404 for other ids. The same start's
Tempo answer (tests/data/starts/tempo-v2-compiled-warm.json.gz, base64 ids and enum names) is served by a second
fake; both must give the same report.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from http_stub import serving
from recorded import DATA, dev

from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.errors import ReportError

TRACE = dev("compiled-warm").trace_id
JAEGER_ANSWER = Path(__file__).resolve().parents[2] / "data" / "jaeger" / "v3-compiled-warm.json.gz"
TEMPO_ANSWER = DATA / "tempo-v2-compiled-warm.json.gz"


def _serve(routes: dict[str, Path], not_found: bytes) -> Iterator[dict]:
    state: dict = {"requests": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            state["requests"].append((self.path, self.headers.get("Authorization")))
            path = self.path.split("?")[0]
            body, code = not_found, 404
            if path in routes:
                body, code = gzip.decompress(routes[path].read_bytes()), 200
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with serving(Handler) as url:
        state["url"] = url
        yield state


@pytest.fixture
def jaeger():
    # Jaeger's 404 body: api_v3's GRPCGatewayError as the HTTP gateway writes it
    missing = json.dumps({"error": {"httpCode": 404, "message": "trace not found"}}).encode()
    yield from _serve({f"/api/v3/traces/{TRACE}": JAEGER_ANSWER}, missing)


@pytest.fixture
def tempo():
    yield from _serve({f"/api/v2/traces/{TRACE}": TEMPO_ANSWER}, b"trace not found\n")


def test_the_answer_is_jaegers_shape():
    doc = json.loads(gzip.decompress(JAEGER_ANSWER.read_bytes()))
    span = doc["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert set(doc) == {"result"} and len(span["traceId"]) == 32 and int(span["traceId"], 16)  # hex, not base64
    assert isinstance(span.get("kind", 1), int) and "status" not in span or isinstance(span["status"]["code"], int)


def _report(capsys, *argv: str) -> list[str]:
    assert cli.main(["report", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_report_from_jaeger_equals_report_from_tempo(jaeger, tempo, capsys):
    from_jaeger = _report(capsys, TRACE, "--jaeger", jaeger["url"])
    from_tempo = _report(capsys, TRACE, "--tempo", tempo["url"])
    assert from_jaeger[0] == from_tempo[0] == f"start {TRACE}  outcome=ready  file={TRACE}"
    assert from_jaeger == from_tempo and len(from_jaeger) > 20
    assert [r[0] for r in jaeger["requests"]] == [f"/api/v3/traces/{TRACE}"]
    assert _report(capsys, TRACE, "--jaeger", jaeger["url"], "--json") == _report(
        capsys, TRACE, "--tempo", tempo["url"], "--json")
    local = sources.one(TRACE, jaeger_url=jaeger["url"])
    assert sorted((s.span_id, s.name, s.start, s.end, s.status) for s in local.spans) == sorted(
        (s.span_id, s.name, s.start, s.end, s.status) for s in dev("compiled-warm").spans)


def test_env_setting_full_url_source_and_basic_auth(jaeger, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_JAEGER_URL", jaeger["url"].replace("http://", "http://me:pw@"))
    assert cli.main(["advise", TRACE]) == 0
    assert "aot_load_failed" in capsys.readouterr().out
    assert jaeger["requests"][0][1] == "Basic bWU6cHc="
    assert cli.main(["compare", TRACE, TRACE]) == 0  # both sides by trace id from Jaeger
    assert capsys.readouterr().out.startswith(f"A: {TRACE}\nB: {TRACE}\n")
    monkeypatch.delenv("OTEL_PYTHON_VLLM_STARTUP_JAEGER_URL")
    lines = _report(capsys, f"{jaeger['url']}/api/v3/traces/{TRACE}")
    assert lines[0].startswith(f"start {TRACE}  outcome=ready")


def test_unknown_trace_and_unreachable_jaeger_are_one_line(jaeger, capsys):
    assert cli.main(["report", "ab" * 16, "--jaeger", jaeger["url"]]) == 2
    assert capsys.readouterr().err == (f"vllm-otel-startup: trace {'ab' * 16} not found in Jaeger at "
                                       f"{jaeger['url']} (HTTP 404)\n")
    with pytest.raises(ReportError, match="cannot reach Jaeger at http://127.0.0.1:9"):
        sources.one(TRACE, jaeger_url="http://127.0.0.1:9")


def test_tempo_and_jaeger_together_is_an_error_unless_a_flag_picks(jaeger, monkeypatch, capsys):
    assert cli.main(["report", TRACE, "--jaeger", jaeger["url"], "--tempo", "http://127.0.0.1:9"]) == 2
    assert "--tempo and --jaeger both given" in capsys.readouterr().err
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_TEMPO_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_JAEGER_URL", jaeger["url"])
    assert cli.main(["report", TRACE]) == 2
    assert "pass --tempo URL or --jaeger URL to pick one" in capsys.readouterr().err
    assert cli.main(["report", TRACE, "--jaeger", jaeger["url"]]) == 0  # a flag wins over both settings
