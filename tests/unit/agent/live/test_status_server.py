"""A start in progress (agent/live/progress.py, agent/live/status_server.py, model/estimate.py): the open phase
stack, the in-progress series and their end at ready, the status endpoint, the readiness estimate from recorded starts.

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
from vllm_otel_startup.model import estimate

DATA = Path(__file__).resolve().parents[3] / "data" / "starts"
REPO = Path(__file__).resolve().parents[4]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - a local test server
        return r.status, r.read()


def gauges(reader, name: str) -> list:
    data = reader.get_metrics_data()
    return [dp for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics
            if m.name == name for dp in m.data.data_points]


# ---- the open phase stack ----------------------------------------------------------------------------------

def test_the_stack_follows_open_phases_and_the_innermost_is_current(start):
    s = start("worker")
    t = s.rt.tracer
    outer = t.start_span("Prepare model")  # vLLM's native name: kv_cache_init
    inner = t.start_span("torch.compile")
    snap = s.rt.live.snapshot()
    assert [e["phase"] for e in snap["stack"]][-2:] == ["kv_cache_init", "torch_compile"]
    assert snap["stack"][0]["phase"] == "worker_process"  # the process span is the outermost
    assert snap["phase"] == "torch_compile" and snap["process_kind"] == "worker"
    assert snap["elapsed_s"] >= snap["phase_elapsed_s"] >= 0
    inner.end()
    assert s.rt.live.snapshot()["phase"] == "kv_cache_init"
    again = t.start_span("torch.compile")  # the second torch.compile of this process: occurrence 1
    assert s.rt.live.snapshot()["stack"][-1]["occurrence"] == 1
    again.end()
    outer.end()


def test_detail_spans_and_waiting_spans(start):
    s = start("engine_core")
    t = s.rt.tracer
    wait = t.start_span("Worker wait ready")
    assert s.rt.live.snapshot()["stack"][-1]["waiting"] is True
    stage = t.start_span("inductor_compile", attributes={sc.PHASE: "torch_compile_stage"})  # a detail phase
    assert s.rt.live.snapshot()["phase"] == "worker_wait"
    stage.end()
    wait.end()


# ---- the series: in progress until the ready point, then gone ----------------------------------------------

def test_in_progress_series_while_starting_and_none_after_ready(start, metrics_reader):
    s = start("worker")
    span = s.rt.tracer.start_span("Load weights")
    time.sleep(0.05)
    [dp] = gauges(metrics_reader, "vllm.startup.in_progress.phase_elapsed")
    assert dp.attributes[sc.PHASE] == "weights_load" and dp.attributes[sc.PROCESS_KIND] == "worker"
    assert dp.attributes[sc.TRACE_ID] == s.rt.trace_id() and sc.MODEL in dp.attributes  # fleet labels
    assert dp.value >= 0.05
    [el] = gauges(metrics_reader, "vllm.startup.in_progress.elapsed")
    assert el.value >= dp.value
    assert not gauges(metrics_reader, "vllm.startup.in_progress.remaining")  # no history: no number
    span.end()
    s.rt.finish()
    assert not gauges(metrics_reader, "vllm.startup.in_progress.phase_elapsed")


def test_no_per_process_labels_on_the_new_series():
    for _name, (_kind, _unit, labels, _doc) in sc.LIVE_METRICS.items():
        assert not {"process.pid", sc.WORKER_RANK} & set(labels)


# ---- the progress message and the trace record -------------------------------------------------------------

def test_tick_prints_one_line_and_records_a_progress_span(start, capsys):
    s = start("api_server")
    span = s.rt.tracer.start_span("Config resolution")
    s.rt.live.tick()
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("vllm-otel-startup: starting: Config resolution ")
    assert "no recorded start of this model and configuration: no estimate" in line
    [rec] = s.spans(sc.PROGRESS_SPAN)
    assert rec.attributes[sc.LIVE_PHASE] == "config" and rec.attributes[sc.LIVE_HISTORY] == 0
    assert rec.attributes[sc.LIVE_PHASE_STACK][0] == "startup"
    assert rec.parent.span_id == s.rt.process_span.get_span_context().span_id
    assert sc.PHASE not in rec.attributes  # not a phase: no metric, not in the local file
    assert rec.end_time == rec.start_time  # a mark: zero-length
    s.rt.live.tick()  # same phase, seconds later: no second record
    assert len(s.spans(sc.PROGRESS_SPAN)) == 1
    span.end()


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
        "from vllm_otel_startup.agent.process import ProcessInfo\n"
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

def _dev_history() -> list[estimate.Recorded]:
    return estimate.load([str(DATA / "dev")])


def _at(kind: str, stack: list[tuple[str, str, float]], occurrence: int = 0) -> dict:
    now = time.time_ns()
    return {"process_kind": kind, "stack": [
        {"phase": ph, "name": name, "start_ns": now - int(el * 1e9), "elapsed_s": el, "waiting": False,
         "occurrence": occurrence if i == len(stack) - 1 else 0} for i, (ph, name, el) in enumerate(stack)]}


def test_estimate_from_the_last_matching_start_walks_the_timeline():
    history = _dev_history()
    facts = {sc.MODEL: "/work/recorded/tiny-model", sc.MODE: "cold", sc.ENFORCE_EAGER: False}
    [match] = estimate.matching(history, facts)
    assert match.attrs[sc.ENFORCE_EAGER] is False and match.attrs[sc.MODE] == "cold"
    (c0, c1), = match.phases[("worker", "torch_compile")]
    procs = [_at("api_server", [("startup", "vLLM startup", 50.0), ("engine_wait", "Engine handshake", 30.0)]),
             _at("worker", [("worker_process", "Worker process", 25.0), ("torch_compile", "torch.compile", 10.0)])]
    procs[0]["stack"][1]["waiting"] = True
    est = estimate.estimate([match], procs)
    assert est is not None and (est.kind, est.phase) == ("worker", "torch_compile")
    usual = (c1 - c0) / 1e9
    assert est.usual == pytest.approx(usual)
    assert est.remaining == pytest.approx(usual - 10.0 + (match.end - c1) / 1e9)
    line = estimate.progress_line(procs, est, 50.0, 1)
    assert line.startswith(f"vllm-otel-startup: starting: torch.compile 10 s of ~{usual:.0f} s, ready in ~")
    # past its usual time: the phase counts as ending now, the rest takes its usual time
    late = _at("worker", [("worker_process", "Worker process", 120.0), ("torch_compile", "torch.compile", 99.0)])
    assert estimate.estimate([match], [late]).remaining == pytest.approx((match.end - c1) / 1e9)


def test_no_matching_history_means_no_number():
    history = _dev_history()
    assert estimate.matching(history, {sc.MODEL: "other-model", sc.MODE: "cold"}) == []
    assert estimate.matching(history, {sc.MODEL: "/work/recorded/tiny-model", sc.MODE: "cold",
                                       sc.MAX_MODEL_LEN: 4096}) == []  # another configuration
    assert estimate.estimate([], [_at("worker", [("torch_compile", "torch.compile", 1.0)])]) is None
    line = estimate.progress_line([_at("worker", [("torch_compile", "torch.compile", 1.0)])], None, 5.0, 0)
    assert "no recorded start of this model and configuration: no estimate" in line and "ready in" not in line


def test_a_phase_the_history_never_ran_falls_back_to_the_enclosing_one():
    history = _dev_history()
    [match] = estimate.matching(history, {sc.MODEL: "tiny-model", sc.MODE: "warm", sc.ENFORCE_EAGER: True})
    # an eager start never compiles: torch.compile is unknown there, its enclosing KV-cache profiling is not
    procs = [_at("worker", [("worker_process", "Worker process", 20.0), ("kv_cache_profile", "KV cache profiling", 2.0),
                            ("torch_compile", "torch.compile", 1.0)])]
    est = estimate.estimate([match], procs)
    assert est is not None and est.phase == "kv_cache_profile"


def test_config_key_ignores_host_and_port_only():
    a = estimate.config_key(["/v/bin/vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000", "--dtype", "f32"])
    b = estimate.config_key(["vllm", "serve", "m", "--port=9000", "--dtype", "f32"])
    assert a == b == ("serve", "m", "--dtype", "f32")
    assert estimate.config_key(["vllm", "serve", "m", "--dtype", "f16"]) != a


def test_a_start_that_exits_closes_its_status_server_even_at_interpreter_shutdown(start, monkeypatch):
    """Python >= 3.12 starts no thread at shutdown, where a start that exits before ready is finished: the status
    server is closed on the exiting thread instead of a thread of its own (agent/threads.py)."""
    from vllm_otel_startup.agent import threads

    port = free_port()
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT", f"127.0.0.1:{port}")
    s = start("api_server")
    assert get(f"http://127.0.0.1:{port}/status")[0] == 200
    monkeypatch.setattr(threads, "start", lambda thread: False)  # what the interpreter says at shutdown
    s.rt.live.stop("exited")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        get(f"http://127.0.0.1:{port}/status")  # closed by the time stop() returned
