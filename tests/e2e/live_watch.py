"""A start watched while it is held in a cold torch.compile (tests/e2e/test_live_startup.py): vmalert with the
generated rules and an Alertmanager notifying a webhook receiver here (Alerting), and a watcher that records when each
sign of the phase came while the start was still in it (Watch). The held start is also the compile-key forensics'
changed-env start (conftest's ``compiled_env_changed``: one cold compile serves both: :func:`held_start`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from dashboards import alerts
from dashboards import queries as dq
from support import ci, harness

ALERTMANAGER = harness.E2E_HOME / "live/pkgroot/usr/bin/prometheus-alertmanager"
VMALERT = harness.PKG_BIN / "vmalert"
ALERT = "VllmStartupStuckInPhase"
PHASE = "torch_compile"
CLUSTER = "e2e-live"  # its fleet: no phase history in the stores (the alert takes its budget path)
BUDGETS = alerts.Budgets(stuck_s={PHASE: 5})
NAME = "live-held"


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
            harness._stop(p)  # noqa: SLF001 - the harness's own bounded stop
        self.webhook.close()


class Watch:
    """Runs while the start runs (harness.serve's on_start): waits for the start to be in PHASE, then for each
    sign of it in the backends, recording when each came and whether /health still said not ready."""

    def __init__(self, backends: harness.Backends, alerting: Alerting, name: str, namespace: str, status_port: int,
                 vllm_port: int) -> None:
        self.b, self.alerting, self.name, self.namespace = backends, alerting, name, namespace
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
            "k8s_cluster_name": CLUSTER, "k8s_namespace_name": self.namespace, "k8s_pod_name": self.name}}]))
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


def held_start(s: Any, cache: Path, namespace: str, env: dict[str, str]) -> dict[str, Any]:
    """A compiled start on ``cache`` (a compile-cache key not made yet there: a cold torch.compile), watched while it
    is held in that phase; its estimate's history is the session's cold compiled start's file alone (same model and
    configuration, its own file). What the live tests read: the history start, this start, the watcher, the alerting
    (its servers stopped once the alert resolved)."""
    cold = s.later("compiled_cold")
    files = s.workdir / "live-files"  # this node's recorded starts: the history of the estimate
    files.mkdir(parents=True, exist_ok=True)
    history = cold.start.trace_file_dir / f"{cold.root.trace_id}.jsonl"
    shutil.copy(history, files)
    alerting = Alerting(s.backends, s.workdir / "live-alerting")
    status_port, vllm_port = harness.free_port(), harness.free_port()
    watch = Watch(s.backends, alerting, NAME, namespace, status_port, vllm_port)
    try:
        start = harness.serve(
            s.tiny_model, cache, s.backends, files=files, name=NAME, namespace=namespace, port=vllm_port,
            on_start=watch,
            env={**env, "K8S_CLUSTER_NAME": CLUSTER,
                 "OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT": f"127.0.0.1:{status_port}",
                 "OTEL_PYTHON_VLLM_STARTUP_LIVE_INTERVAL_MS": "1000",
                 "OTEL_PYTHON_VLLM_STARTUP_METRICS_FLUSH_MS": "1000"},
            on_ready=lambda proc: watch.thread and watch.thread.join(120))
        harness.wait_until(lambda: bool(alerting.webhook.alerts("resolved")), 90,
                           "the resolved alert at the webhook receiver")
    finally:
        alerting.stop()
    return {"first": cold.start, "start": start, "watch": watch, "alerting": alerting}
