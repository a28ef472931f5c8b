"""The status endpoint of a start in progress (agent/live/status_server.py): JSON and Prometheus until ready, the
children's spooled state merged in, fail-soft on a taken port, not even imported when disabled.

Fast-feedback tests on the fake vLLM tree (tests/unit/fake_vllm.py) and on the recorded starts in
tests/data/starts; the real proof (a real `vllm serve` held in torch.compile, VictoriaMetrics, Prometheus,
vmalert, Alertmanager) is tests/e2e/test_live_startup.py.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import spool
from vllm_otel_startup.agent.live import status_server

DATA = Path(__file__).resolve().parents[3] / "data" / "starts"
REPO = Path(__file__).resolve().parents[4]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - a local test server
        return r.status, r.read()


# ---- the open phase stack ----------------------------------------------------------------------------------


# ---- the series: in progress until the ready point, then gone ----------------------------------------------


# ---- the progress message and the trace record -------------------------------------------------------------


# ---- the status endpoint -----------------------------------------------------------------------------------

def test_status_endpoint_answers_json_and_prometheus_until_ready(start, monkeypatch):
    port = free_port()
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT", f"127.0.0.1:{port}")
    s = start("api_server")
    span = s.rt.tracer.start_span("Load weights")
    code, body = get(f"http://127.0.0.1:{port}/status")
    doc = json.loads(body)
    assert code == 200 and doc["state"] == "starting" and doc["phase"] == "weights_load"
    assert doc["trace_id"] == s.rt.trace_id() and doc["expected_remaining_s"] is None
    assert doc["estimate"]["history"] == 0 and doc["last_error"] is None
    assert [e["phase"] for e in doc["processes"][0]["stack"]][0] == "startup"
    code, text = get(f"http://127.0.0.1:{port}/metrics")
    lines = text.decode().splitlines()
    assert "# TYPE vllm_startup_in_progress_phase_elapsed_seconds gauge" in lines
    assert any(ln.startswith("vllm_startup_in_progress_phase_elapsed_seconds{") and
               'vllm_startup_phase="weights_load"' in ln for ln in lines)
    span.end()
    s.rt.finish()
    s.rt.live and s.rt.live.stop("ready")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            get(f"http://127.0.0.1:{port}/status")
        except (urllib.error.URLError, ConnectionError):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the status server still answers after ready")


def test_status_endpoint_merges_the_childrens_spooled_state(start, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    s = start("api_server")
    wait = s.rt.tracer.start_span("Engine handshake")  # the API server only waits
    time.sleep(0.01)
    now = time.time_ns()  # the child's phases began after the API server's
    child = {"process_kind": "engine_core", "pid": 4242, "phase": "torch_compile", "name": "torch.compile",
             "phase_elapsed_s": 3.0, "elapsed_s": 20.0, "at_ns": now,
             "stack": [{"phase": "engine_core_process", "name": "EngineCore process", "start_ns": now - 2000,
                        "elapsed_s": 20.0, "waiting": False, "occurrence": 0},
                       {"phase": "torch_compile", "name": "torch.compile", "start_ns": now - 1000,
                        "elapsed_s": 3.0, "waiting": False, "occurrence": 0}]}
    assert spool.write_live(s.rt.trace_id(), "engine_core-4242.live", json.dumps(child))
    s.rt.live.children = spool.read_live(s.rt.trace_id())
    doc = s.rt.live.status()
    assert doc["phase"] == "torch_compile" and doc["phase_process_kind"] == "engine_core"
    assert {p["process_kind"] for p in doc["processes"]} == {"api_server", "engine_core"}
    kinds = {lbl[sc.PROCESS_KIND] for m, _, lbl in s.rt.live.series() if m.endswith("phase_elapsed")}
    assert kinds == {"api_server", "engine_core"}  # the scrape sees the whole start
    assert {lbl[sc.PROCESS_KIND] for _, _, lbl in s.rt.live.own_series() if sc.PROCESS_KIND in lbl} == {"api_server"}
    spool.remove_live(s.rt.trace_id(), "engine_core-4242.live")
    assert spool.read_live(s.rt.trace_id()) == []
    wait.end()


def test_a_taken_port_or_a_bad_setting_costs_one_warning_and_the_start_goes_on(start, monkeypatch, caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT", f"127.0.0.1:{taken.getsockname()[1]}")
        with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
            s = start("api_server")
        assert s.rt.live.server is None and s.rt.process_span is not None
        assert [r.getMessage() for r in caplog.records if "status endpoint" in r.getMessage()].__len__() == 1
    with pytest.raises(ValueError):
        status_server.parse("not-a-port")
    with pytest.raises(ValueError):
        status_server.parse("70000")
    assert status_server.parse("9464") == ("0.0.0.0", 9464)
    assert status_server.parse("127.0.0.1:9464") == ("127.0.0.1", 9464)


def test_the_status_server_is_not_even_imported_when_disabled(tmp_path):
    """A fresh interpreter instruments an API-server start with no STATUS_PORT: the module never loads."""
    code = (
        "import os, sys, time\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry import trace\n"
        "from vllm_otel_startup.agent.foundation.process import ProcessInfo\n"
        "from vllm_otel_startup.agent.runtime import Runtime\n"
        "p = TracerProvider(); t = trace.get_tracer('x', tracer_provider=p)\n"
        "info = ProcessInfo(kind='api_server', pid=os.getpid(), create_ns=time.time_ns(), create_source='proc',"
        " hook_ns=time.time_ns(), argv=['vllm', 'serve', 'm'])\n"
        "rt = Runtime(info, t, p); rt.start()\n"
        "assert rt.live is not None\n"
        "print('status_server' in ' '.join(sys.modules), 'http.server' in sys.modules)\n")
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path),
           "OTEL_PYTHON_VLLM_STARTUP_DIR": str(tmp_path / "starts")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# ---- the estimate ------------------------------------------------------------------------------------------


def test_a_start_that_exits_closes_its_status_server_even_at_interpreter_shutdown(start, monkeypatch):
    """Python >= 3.12 starts no thread at shutdown, where a start that exits before ready is finished: the status
    server is closed on the exiting thread instead of a thread of its own (agent/foundation/threads.py)."""
    from vllm_otel_startup.agent.foundation import threads

    port = free_port()
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT", f"127.0.0.1:{port}")
    s = start("api_server")
    assert get(f"http://127.0.0.1:{port}/status")[0] == 200
    monkeypatch.setattr(threads, "start", lambda thread: False)  # what the interpreter says at shutdown
    s.rt.live.stop("exited")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        get(f"http://127.0.0.1:{port}/status")  # closed by the time stop() returned
