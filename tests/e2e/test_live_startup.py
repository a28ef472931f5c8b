"""Live startup, proven on real parts: a real instrumented `vllm serve` held in a cold torch.compile (~35 s on the
CI machine's CPU) is seen *while it is still in that phase* — its in-progress series in VictoriaMetrics (OTLP) and
in Prometheus (scraping the opt-in status endpoint), the status endpoint answering with that phase, the
VllmStartupStuckInPhase alert evaluated by a real vmalert and delivered by a real Alertmanager to a webhook
receiver here, naming the phase — all before the server is ready; then the phase ends and the alert resolves.

The start under test (a fresh cache root: a cold compile) has this node's history: the local start file of the
session's cold compiled start (conftest's ``compiled_cold``, same model and configuration), from which its readiness
estimate comes. Its fleet (cluster label ``e2e-live``) has no phase history in the stores, so the alert
takes its budget path, with a 5 s torch.compile budget (the history path: tests/fleet/test_alert_rules.py).
vmalert comes from Debian's victoria-metrics package (tests/e2e/bootstrap.sh), Alertmanager from Debian's
prometheus-alertmanager (tests/e2e/bootstrap_live.sh).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import alerts
from dashboards import queries as dq
from support import ci, harness
from support.plans import Session, plan
from vllm_otel_startup import semconv as sc

pytestmark = pytest.mark.e2e

ALERTMANAGER = harness.E2E_HOME / "live/pkgroot/usr/bin/prometheus-alertmanager"
VMALERT = harness.PKG_BIN / "vmalert"
ALERT = "VllmStartupStuckInPhase"
PHASE = "torch_compile"
CLUSTER, NAMESPACE = "e2e-live", "live"
BUDGETS = alerts.Budgets(stuck_s={PHASE: 5})
LINE = re.compile(r"vllm-otel-startup: starting: (?P<name>.+?) [\d.]+ s(?: of ~[\d.]+ s, ready in ~(?P<rem>[\d.]+) s)? "
                  r"\((?P<at>[\d.]+) s since start")


def _tool(path: Path) -> str:
    if not path.exists():
        ci.missing(f"{path} missing", "tests/e2e/bootstrap.sh and tests/e2e/bootstrap_live.sh")
    return str(path)


class Webhook:
    """Alertmanager's webhook receiver: every notification, with the time it arrived."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, status: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, a) for t, msg in self.received for a in msg.get("alerts", [])
                if a.get("status") == status and a["labels"].get("alertname") == ALERT]

    def close(self) -> None:
        self.server.shutdown()


class Alerting:
    """vmalert on VictoriaMetrics with the generated rules (1 s evaluation), notifying an Alertmanager whose one
    route goes to the webhook receiver."""

    def __init__(self, backends: harness.Backends, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.webhook = Webhook()
        self.am_port, self.vmalert_port = harness.free_port(), harness.free_port()
        groups = alerts.rule_groups(BUDGETS)
        for g in groups:
            g["interval"] = "1s"
        (workdir / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump({
            "route": {"receiver": "test", "group_by": ["alertname", "k8s_pod_name", "vllm_startup_phase"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "test", "webhook_configs": [
                {"url": f"http://127.0.0.1:{self.webhook.port}/", "send_resolved": True}]}]}))
        self.procs = [
            subprocess.Popen([_tool(ALERTMANAGER), f"--config.file={workdir / 'alertmanager.yml'}",
                              f"--storage.path={workdir / 'am'}", f"--web.listen-address=127.0.0.1:{self.am_port}",
                              "--cluster.listen-address="], stdout=open(workdir / "alertmanager.log", "wb"),  # noqa: SIM115
                             stderr=subprocess.STDOUT, start_new_session=True),
            subprocess.Popen([_tool(VMALERT), f"-rule={workdir / 'rules.yaml'}",
                              f"-datasource.url=http://127.0.0.1:{backends.vm_http}",
                              f"-notifier.url=http://127.0.0.1:{self.am_port}", "-evaluationInterval=1s",
                              "-rule.evalDelay=0s", f"-httpListenAddr=127.0.0.1:{self.vmalert_port}"],
                             stdout=open(workdir / "vmalert.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
                             start_new_session=True)]
        try:
            harness.wait_until(lambda: harness.http_get(f"http://127.0.0.1:{self.am_port}/-/ready")[0] == 200, 60,
                               "Alertmanager")
            harness.wait_until(lambda: harness.http_get(f"http://127.0.0.1:{self.vmalert_port}/health")[0] == 200,
                               60, "vmalert")
        except BaseException:
            self.stop()  # no servers left behind
            raise

    def stop(self) -> None:
        for p in self.procs:
            harness.stop_process(p)
        self.webhook.close()


class Watch:
    """Runs while the start runs (harness.serve's on_start): waits for the start to be in PHASE, then for each
    sign of it in the backends, recording when each came and whether /health still said not ready."""

    def __init__(self, backends: harness.Backends, alerting: Alerting, name: str, status_port: int,
                 vllm_port: int) -> None:
        self.b, self.alerting, self.name = backends, alerting, name
        self.status_url = f"http://127.0.0.1:{status_port}/status"
        self.status_port, self.vllm_port = status_port, vllm_port
        self.seen: dict[str, Any] = {}
        self.errors: list[str] = []
        self.thread: threading.Thread | None = None

    def __call__(self, proc: subprocess.Popen) -> None:
        self.thread = threading.Thread(target=self._run, args=(proc,), daemon=True)
        self.thread.start()

    def _ready(self) -> bool:
        return harness.http_get(f"http://127.0.0.1:{self.vllm_port}/health", timeout=1)[0] == 200

    def _status(self) -> dict[str, Any] | None:
        code, body = harness.http_get(self.status_url, timeout=2)
        return json.loads(body) if code == 200 else None

    def _mark(self, what: str, value: Any) -> None:
        self.seen[what] = {"at": time.time(), "ready": self._ready(), "status": self._status(), "value": value}

    def _run(self, proc: subprocess.Popen) -> None:
        try:
            self._watch(proc)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _watch(self, proc: subprocess.Popen) -> None:
        def in_phase() -> bool:
            st = self._status() if proc.poll() is None else None
            return bool(st and st.get("phase") == PHASE)

        harness.wait_until(in_phase, 400, f"the status endpoint reporting {PHASE}", interval=0.5)
        self._mark("status", None)
        targets = self.b.targets / f"{self.name}-status.json"  # Prometheus scrapes the status endpoint
        targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{self.status_port}"], "labels": {
            "k8s_cluster_name": CLUSTER, "k8s_namespace_name": NAMESPACE, "k8s_pod_name": self.name}}]))
        sel = (f'vllm_startup_in_progress_phase_elapsed_seconds{{vllm_startup_phase="{PHASE}", '
               f'k8s_pod_name="{self.name}"}}')
        found: dict[str, list] = {}

        def has(store: str, query) -> bool:
            found[store] = query(sel)
            return bool(found[store])

        harness.wait_until(lambda: has("prom", self.b.prom_query), 60, "Prometheus scraping the status endpoint")
        self._mark("prometheus", found["prom"])
        harness.wait_until(lambda: has("vm", self.b.vm_query), 60, "the in-progress series in VictoriaMetrics")
        self._mark("victoriametrics", found["vm"])
        # every dashboard / alert query over the in-progress series answers now, with its labels
        answers = {}
        for q in dq.all_queries():
            if q.needs == {alerts.STARTING} and dq.OTLP in q.paths:
                answers[q.source] = self.b.vm_query(q.expr)
        self._mark("queries", answers)
        harness.wait_until(lambda: bool(self.alerting.webhook.alerts("firing")), 60,
                           "the alert at Alertmanager's webhook receiver")
        self._mark("firing", self.alerting.webhook.alerts("firing"))
        spans: list = []

        def progress_span() -> bool:
            spans[:] = [s for s in self.b.all_spans(name="Startup in progress")
                        if (s.get("attributes") or {}).get("vllm.startup.live.phase") == PHASE]
            return bool(spans)

        harness.wait_until(progress_span, 60, "a 'Startup in progress' span in Phoenix", interval=1.0)
        self._mark("trace", spans)
        targets.unlink()


@plan("live/held", after=("compiled_cold",))
def _live(s: Session) -> dict:
    cold = s.later("compiled_cold")
    files = s.workdir / "live-files"  # this node's recorded starts: the history of the estimate
    files.mkdir(parents=True, exist_ok=True)
    history = cold.start.trace_file_dir / f"{cold.root.trace_id}.jsonl"
    shutil.copy(history, files)  # the session's cold compiled start: same model and configuration, its own file
    alerting = Alerting(s.backends, s.workdir / "live-alerting")
    status_port, vllm_port = harness.free_port(), harness.free_port()
    name = "live-held"
    watch = Watch(s.backends, alerting, name, status_port, vllm_port)
    try:
        start = harness.serve(
            s.tiny_model, s.workdir / "live-held", s.backends, files=files, name=name, namespace=NAMESPACE,
            port=vllm_port, on_start=watch,
            env={"K8S_CLUSTER_NAME": CLUSTER, "OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT": f"127.0.0.1:{status_port}",
                 "OTEL_PYTHON_VLLM_STARTUP_LIVE_INTERVAL_MS": "1000",
                 "OTEL_PYTHON_VLLM_STARTUP_METRICS_FLUSH_MS": "1000",
                 # each process's own series every second throughout: by default a working process (the worker in
                 # torch.compile) exports at most every EXPORT_BUSY_MS (30 s), its first an interval after its imports,
                 # and this start's whole torch.compile can pass before the worker's series reach VictoriaMetrics
                 "OTEL_PYTHON_VLLM_STARTUP_EXPORT_BUSY_MS": "0"},
            on_ready=lambda proc: watch.thread and watch.thread.join(120))
        harness.wait_until(lambda: bool(alerting.webhook.alerts("resolved")), 90,
                           "the resolved alert at the webhook receiver")
    finally:
        alerting.stop()
    return {"first": cold.start, "start": start, "watch": watch, "alerting": alerting}


@pytest.fixture(scope="module")
def live(e2e):
    return e2e.later("live/held").result()


def test_every_sign_came_while_the_start_was_still_in_the_phase(live):
    w, st = live["watch"], live["start"]
    assert not w.errors, w.errors
    t0 = st.spawn_ns / 1e9
    print("seconds after spawn: " + ", ".join(f"{k} {w.seen[k]['at'] - t0:.1f}" for k in w.seen)
          + f", ready {(st.ready_ns - st.spawn_ns) / 1e9:.1f}, resolved "
          f"{live['alerting'].webhook.alerts('resolved')[-1][0] - t0:.1f}")
    for what in ("status", "prometheus", "victoriametrics", "queries", "firing", "trace"):
        seen = w.seen[what]
        assert seen["ready"] is False, f"{what}: the server was already ready"
        assert seen["at"] * 1e9 < st.ready_ns, what
    # the status endpoint answered with the phase before and after each sign (the phase still open)
    assert all(w.seen[k]["status"]["phase"] == PHASE for k in ("status", "prometheus", "victoriametrics"))


def test_status_endpoint_answers_the_phase_stack_across_processes(live):
    doc = live["watch"].seen["status"]["status"]
    assert doc["state"] == "starting" and doc["phase"] == PHASE and doc["phase_name"] == "torch.compile"
    kinds = {p["process_kind"] for p in doc["processes"]}
    assert {"api_server", "engine_core", "worker"} <= kinds
    worker = next(p for p in doc["processes"] if p["process_kind"] == doc["phase_process_kind"])
    assert PHASE in [e["phase"] for e in worker["stack"]]
    api = next(p for p in doc["processes"] if p["process_kind"] == "api_server")
    assert api["stack"][0]["phase"] == "startup" and api["phase"] == "engine_wait"
    # an estimate from the first start (same model and configuration, cold): a number, from one start
    assert doc["estimate"]["history"] == 1 and doc["expected_remaining_s"] > 0


def test_in_progress_series_in_both_stores_name_the_start(live):
    w = live["watch"]
    trace = w.seen["status"]["status"]["trace_id"]
    for store in ("prometheus", "victoriametrics"):
        [series] = [s for s in w.seen[store]["value"] if s["metric"].get("vllm_startup_process_kind") == "worker"]
        m = series["metric"]
        assert m["trace_id"] == trace and m["vllm_model"] == "tiny-model" and float(series["value"][1]) > 0
        assert m["k8s_cluster_name"] == CLUSTER and m["k8s_pod_name"] == "live-held"


def test_dashboard_and_alert_queries_over_the_in_progress_series_answer_while_starting(live):
    answers = live["watch"].seen["queries"]["value"]
    assert {"dashboard/vllm-startup-fleet/Starting now/A", "dashboard/vllm-startup-fleet/Starting now/B",
            f"alert/{ALERT}/in_progress_phase_seconds"} <= set(answers)
    for source, result in answers.items():
        assert result, f"{source}: no data while starting"


def test_the_alert_fired_naming_pod_model_and_phase_and_resolved_once_the_phase_ended(live):
    """The alert is about the phase, so it resolves when the worker leaves torch.compile, which on this CPU is
    0-10 s before the server is ready (KV-cache profiling and warm-up follow): its resolution is timed against the
    phase span's end in the start's own recorded trace, not against readiness. (Its firing is timed against
    readiness, by the test above: the phase's end can come within seconds of the firing's arrival.)"""
    firing = live["watch"].seen["firing"]["value"]
    labels = firing[0][1]["labels"]
    assert labels["k8s_pod_name"] == "live-held" and labels["vllm_model"] == "tiny-model"
    assert labels["vllm_startup_phase"] == PHASE and labels["vllm_startup_process_kind"] == "worker"
    assert PHASE in firing[0][1]["annotations"]["summary"] and "live-held" in firing[0][1]["annotations"]["summary"]
    st = live["start"]
    ended = [s.end for s in harness.local_spans(st) if s.attrs.get(sc.PHASE) == PHASE
             and (s.attrs.get(sc.PROCESS_KIND) or s.resource.get(sc.PROCESS_KIND)) == "worker"]
    assert ended, "no worker torch.compile span in the start's recorded trace"
    resolved = live["alerting"].webhook.alerts("resolved")
    assert resolved and resolved[-1][0] * 1e9 > max(ended)


def test_the_trace_store_shows_the_unfinished_start(live):
    spans = live["watch"].seen["trace"]["value"]
    a = spans[0]["attributes"]
    assert a["vllm.startup.live.phase_stack"][0] == "worker_process" and a["vllm.startup.live.phase_elapsed_s"] >= 0


def test_progress_lines_give_the_estimate_and_its_error(live, workdir):
    """The one-line message at each tick; its estimate against the remaining time measured (printed, recorded)."""
    st = live["start"]
    total = (st.ready_ns - st.spawn_ns) / 1e9
    rows = []
    for m in LINE.finditer(st.log):
        if m.group("rem") is not None:
            at, rem = float(m.group("at")), float(m.group("rem"))
            rows.append({"phase": m.group("name"), "at_s": at, "estimate_s": rem, "actual_s": total - at})
    assert rows, "no progress message with an estimate"
    (workdir / "live-estimate.json").write_text(json.dumps(rows, indent=1))
    err = [abs(r["estimate_s"] - r["actual_s"]) for r in rows]
    print(f"estimate: {len(rows)} messages, mean |error| {sum(err) / len(err):.1f} s, start {total:.1f} s; "
          f"rows in {workdir / 'live-estimate.json'}")
    assert any(r["phase"] == "torch.compile" for r in rows)  # the held phase, named in the message
    assert all(0 <= r["estimate_s"] < 10 * total for r in rows)
    # the history start's own log: no history then, and it says so instead of a number
    first = live["first"].log
    assert "no recorded start of this model and configuration: no estimate" in first and "ready in ~" not in first
