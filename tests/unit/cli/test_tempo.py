"""report from Grafana Tempo by trace id. Tempo itself cannot run here: a local http.server on 127.0.0.1
serves a recorded response instead, in Tempo's shape (tests/data/starts/tempo-*.json.gz, made from a real
start by tools/tempo_fixture.py); unknown ids get Tempo's 404."""

from __future__ import annotations

import gzip
from http.server import BaseHTTPRequestHandler

import pytest
from http_stub import serving
from recorded import DATA, dev

from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.errors import ReportError

TRACE = dev("compiled-warm").trace_id


@pytest.fixture
def tempo():
    """A fake Tempo: ``versions`` says which query APIs it has; requests are recorded."""
    state = {"versions": {"v1", "v2"}, "requests": [], "status": None}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            state["requests"].append((self.path, self.headers.get("Authorization"), self.headers.get("X-Scope-OrgID")))
            path = self.path.split("?")[0]
            body, code = b"404 page not found\n", 404
            for version, prefix in (("v2", "/api/v2/traces/"), ("v1", "/api/traces/")):
                if path.startswith(prefix) and version in state["versions"]:
                    if path[len(prefix):] == TRACE:
                        with gzip.open(DATA / f"tempo-{version}-compiled-warm.json.gz") as f:
                            body, code = f.read(), 200
                    else:
                        body, code = b"trace not found\n", 404
            if state["status"]:
                body, code = b"internal error\nmore", state["status"]
            self.send_response(code)
            self.send_header("Content-Type", "application/json" if code == 200 else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with serving(Handler) as url:
        state["url"] = url
        yield state


def test_report_by_trace_id_from_tempo_v2(tempo, capsys):
    assert cli.main(["report", TRACE, "--tempo", tempo["url"]]) == 0
    out = capsys.readouterr().out
    assert f"start {TRACE}  outcome=ready" in out and "torch.compile  [worker]  (compile cache hit)" in out
    assert [r[0] for r in tempo["requests"]] == [f"/api/v2/traces/{TRACE}"]


def test_older_tempo_without_v2_falls_back_to_v1(tempo):
    tempo["versions"] = {"v1"}
    st = sources.one(TRACE, tempo_url=tempo["url"])
    assert st.trace_id == TRACE and len(st.spans) == len(dev("compiled-warm").spans)
    assert [r[0] for r in tempo["requests"]] == [f"/api/v2/traces/{TRACE}", f"/api/traces/{TRACE}"]


def test_full_url_env_default_basic_auth_and_tenant(tempo, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_TEMPO_URL", tempo["url"].replace("http://", "http://me:pw@"))
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_TEMPO_TENANT", "team-a")
    assert cli.main(["advise", TRACE]) == 0
    assert "aot_load_failed" in capsys.readouterr().out
    assert tempo["requests"][0][1] == "Basic bWU6cHc=" and tempo["requests"][0][2] == "team-a"
    assert cli.main(["report", f"{tempo['url']}/api/v2/traces/{TRACE}"]) == 0


def test_unknown_trace_is_one_line_404(tempo, capsys):
    assert cli.main(["report", "ab" * 16, "--tempo", tempo["url"]]) == 2
    err = capsys.readouterr().err
    assert err == f"vllm-otel-startup: trace {'ab' * 16} not found in Tempo at {tempo['url']} (HTTP 404)\n"


def test_server_error_and_unreachable_tempo(tempo):
    tempo["status"] = 500
    with pytest.raises(ReportError, match="answered HTTP 500 for trace .*: internal error$"):
        sources.one(TRACE, tempo_url=tempo["url"])
    with pytest.raises(ReportError, match="cannot reach Tempo at http://127.0.0.1:9"):
        sources.one(TRACE, tempo_url="http://127.0.0.1:9")
