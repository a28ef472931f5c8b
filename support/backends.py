"""The real backends of the end-to-end tests: the stores a start exports to, and what the tests read back.

Backends (installed by tests/e2e/bootstrap.sh, started here on 127.0.0.1 with free ports):
  rotel           an OTLP collector (gRPC + HTTP in), exporting traces over gRPC to Phoenix and metrics over
                  OTLP/HTTP to VictoriaMetrics
  Phoenix         a trace store with a REST span API (Tempo cannot be installed here; Phoenix stands in)
  VictoriaMetrics an OTLP metrics store with the Prometheus query API (Prometheus's own OTLP receiver is
                  patched out of Debian's build)
  Prometheus      scraping each running vLLM server's own GET /metrics (file-based discovery, 1 s interval)
  vmalert         evaluating the mixin's recording rules over VictoriaMetrics and writing the results back into
                  it (Prometheus evaluates them itself, rule_files); both every 2 s instead of every minute
Phoenix's REST API does not return resource attributes, so starts also write the local OTLP-JSON file
(OTEL_TRACES_EXPORTER=otlp,vllm_startup_file): resource-level checks read that real export.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.net import free_port, http_get, listening, stop_process, wait_until
from vllm_otel_startup.cli.report import Span

E2E_HOME = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e"))
BACKENDS = E2E_HOME / "venv-backends"
PKG_BIN = E2E_HOME / "pkgroot/usr/bin"
REPO = Path(__file__).resolve().parents[1]
MIXIN_RULES = REPO / "mixin" / "prometheus_rules.yaml"
RULE_INTERVAL = "2s"
# Every start runs as a pod of one test cluster would (downward-API environment -> k8s.* resource attributes);
# K8S_POD_NAME is the start's own name, K8S_NAMESPACE_NAME its fleet (compiled starts have one of their own).
K8S = {"K8S_CLUSTER_NAME": "e2e", "K8S_NODE_NAME": "ci-node"}


def recording_rules(path: Path, interval: str = RULE_INTERVAL) -> Path:
    """The shipped recording rules (mixin/prometheus_rules.yaml), evaluated every ``interval``."""
    import yaml

    groups = yaml.safe_load(MIXIN_RULES.read_text())["groups"]
    path.write_text(yaml.safe_dump({"groups": [{**g, "interval": interval} for g in groups]}))
    return path


# deploy/'s scrape path: vLLM's prometheus-client mount, which answers OpenMetrics (with the counters' exemplars) to
# Prometheus; `/metrics` is prometheus-fastapi-instrumentator's route, plain text 0.0.4 only (deploy/README.md)
METRICS_PATH = "/metrics/"


@dataclass
class Backends:
    workdir: Path
    phoenix_http: int = field(default_factory=free_port)
    phoenix_grpc: int = field(default_factory=free_port)
    otlp_grpc: int = field(default_factory=free_port)
    otlp_http: int = field(default_factory=free_port)
    vm_http: int = field(default_factory=free_port)
    prom_http: int = field(default_factory=free_port)
    vmalert_http: int = field(default_factory=free_port)
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list = field(default_factory=list)

    def start(self) -> Backends:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(self.phoenix_http),
                   PHOENIX_GRPC_PORT=str(self.phoenix_grpc), PHOENIX_WORKING_DIR=str(self.workdir / "phoenix"),
                   PHOENIX_TELEMETRY_ENABLED="false")
        for k in [k for k in env if k.startswith("OTEL_")]:
            env.pop(k)
        self.procs.append(subprocess.Popen(
            [str(BACKENDS / "bin/phoenix"), "serve"], env=env, start_new_session=True,
            stdout=self._log("phoenix"), stderr=subprocess.STDOUT))
        rotel = next((BACKENDS / "lib").glob("python3*/site-packages/rotel/rotel-agent"))
        self.procs.append(subprocess.Popen(
            [str(rotel), "start",
             "--otlp-grpc-endpoint", f"127.0.0.1:{self.otlp_grpc}",
             "--otlp-http-endpoint", f"127.0.0.1:{self.otlp_http}",
             "--exporter", "otlp",
             "--otlp-exporter-traces-endpoint", f"http://127.0.0.1:{self.phoenix_grpc}",
             "--otlp-exporter-traces-protocol", "grpc",
             "--otlp-exporter-metrics-endpoint", f"http://127.0.0.1:{self.vm_http}/opentelemetry/v1/metrics",
             "--otlp-exporter-metrics-protocol", "http",
             "--otlp-exporter-logs-endpoint", "http://127.0.0.1:9/v1/logs",
             "--otlp-receiver-logs-disabled"],
            start_new_session=True, stdout=self._log("rotel"), stderr=subprocess.STDOUT))
        self.procs.append(subprocess.Popen(
            [str(PKG_BIN / "victoria-metrics"), f"-httpListenAddr=127.0.0.1:{self.vm_http}",
             f"-storageDataPath={self.workdir / 'vm'}", "-opentelemetry.usePrometheusNaming",
             "-search.latencyOffset=0s", "-search.maxStalenessInterval=2h"],
            start_new_session=True, stdout=self._log("victoria-metrics"), stderr=subprocess.STDOUT))
        rules = recording_rules(self.workdir / "recording-rules.yaml")
        self.targets = self.workdir / "targets"
        self.targets.mkdir(exist_ok=True)
        (self.workdir / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{rules}']\n"
            "scrape_configs:\n"
            "  - job_name: vllm\n"
            f"    file_sd_configs: [{{files: ['{self.targets}/*.json'], refresh_interval: 1s}}]\n")
        self.procs.append(subprocess.Popen(
            [str(PKG_BIN / "prometheus"), f"--config.file={self.workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.workdir / 'prom'}", f"--web.listen-address=127.0.0.1:{self.prom_http}",
             "--enable-feature=exemplar-storage"],  # deploy/'s Prometheus flag: the counters' exemplars kept
            start_new_session=True, stdout=self._log("prometheus"), stderr=subprocess.STDOUT))
        wait_until(lambda: http_get(f"http://127.0.0.1:{self.phoenix_http}/healthz")[0] == 200, 180, "Phoenix")
        wait_until(lambda: listening(self.otlp_http), 30, "rotel")
        wait_until(lambda: http_get(f"http://127.0.0.1:{self.vm_http}/health")[0] == 200, 30, "VictoriaMetrics")
        wait_until(lambda: http_get(f"http://127.0.0.1:{self.prom_http}/-/ready")[0] == 200, 30, "Prometheus")
        self.procs.append(subprocess.Popen(
            [str(PKG_BIN / "vmalert"), f"-rule={rules}", f"-datasource.url=http://127.0.0.1:{self.vm_http}",
             f"-remoteWrite.url=http://127.0.0.1:{self.vm_http}", "-rule.evalDelay=0s",
             "-remoteWrite.flushInterval=500ms", f"-httpListenAddr=127.0.0.1:{self.vmalert_http}"],
            start_new_session=True, stdout=self._log("vmalert"), stderr=subprocess.STDOUT))
        wait_until(lambda: http_get(f"http://127.0.0.1:{self.vmalert_http}/-/ready")[0] == 200, 30, "vmalert")
        return self

    def _log(self, name: str):
        f = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - open as long as the server runs
        self.logs.append(f)
        return f

    def stop(self) -> None:
        for p in reversed(self.procs):
            stop_process(p)
        for f in self.logs:
            f.close()

    # ---- metrics stores ----------------------------------------------------------------------------
    def vm_query(self, query: str) -> list[dict[str, Any]]:
        """Instant query on VictoriaMetrics (freshly ingested rows made searchable first)."""
        http_get(f"http://127.0.0.1:{self.vm_http}/internal/force_flush")
        return _prom_api(f"http://127.0.0.1:{self.vm_http}/api/v1/query", query)

    def prom_query(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query on Prometheus, at ``at`` (unix s): a stopped server's series are stale afterwards."""
        return _prom_api(f"http://127.0.0.1:{self.prom_http}/api/v1/query", query, at)

    def prom_exemplars(self, query: str, start: float, end: float) -> list[dict[str, Any]]:
        """Prometheus's stored exemplars of ``query``'s series between ``start`` and ``end`` (unix s)."""
        params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}"})
        status, body = http_get(f"http://127.0.0.1:{self.prom_http}/api/v1/query_exemplars?{params}", timeout=30)
        assert status == 200, f"exemplar query {query!r} failed: {status} {body[:300]!r}"
        return json.loads(body)["data"]

    def scrape(self, name: str, port: int, timeout: float = 60, until: str = "vllm_startup_starts_total",
               hold: float = 0.0, namespace: str = "vllm") -> float:
        """Have Prometheus scrape the running server until it holds ``until`` for this pod (and ``hold`` seconds
        more: a rate needs two samples); the time of the last scrape, where queries about this start are
        evaluated (the target is then removed, and an instant selector sees its series as stale after it).
        The target carries the Kubernetes identity labels deploy/'s scrape relabelling gives a pod."""
        target = self.targets / f"{name}.json"
        labels = {**{k.lower(): v for k, v in K8S.items()}, "k8s_pod_name": name, "k8s_namespace_name": namespace,
                  "__metrics_path__": METRICS_PATH}
        target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": labels}]))
        seen: list[float] = []

        def scraped() -> bool:
            res = self.prom_query(f'{until}{{k8s_pod_name="{name}"}}')
            if res:
                seen.append(float(res[0]["value"][0]))
            return bool(res)

        try:
            wait_until(scraped, timeout, f"Prometheus scraping {name}", interval=0.5)
            if hold:
                time.sleep(hold)
                scraped()
        finally:
            target.unlink()
        return seen[-1]

    # ---- Phoenix queries ---------------------------------------------------------------------------
    def all_spans(self, **filters: str) -> list[dict[str, Any]]:
        """Every span Phoenix holds, or those matching ``filters`` (its span list's query parameters: ``trace_id``,
        ``name``)."""
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            params = {"limit": "1000", **filters} | ({"cursor": cursor} if cursor else {})
            url = f"http://127.0.0.1:{self.phoenix_http}/v1/projects/default/spans?{urllib.parse.urlencode(params)}"
            status, body = http_get(url, timeout=30)
            assert status == 200, f"Phoenix span query failed: {status} {body[:200]!r}"
            doc = json.loads(body)
            out.extend(doc["data"])
            cursor = doc.get("next_cursor")
            if not cursor:
                return out

    def trace_of_root(self, pid: int, expect: int = 0, timeout: float = 30) -> list[Span]:
        """The spans of the start whose root carries process.pid == pid, once at least ``expect`` of them
        arrived (or ``timeout`` passed: the caller asserts on what is there). Asks Phoenix for roots, then for that
        trace alone (the store holds every start of the session)."""
        def root_trace() -> str | None:
            roots = [from_phoenix(s) for s in self.all_spans(name="vLLM startup")]
            return next((s.trace_id for s in roots if s.attrs.get("process.pid") == pid), None)

        return self._trace_when(root_trace, expect, timeout, f"the startup trace of pid {pid} in Phoenix")

    def trace(self, trace_id: str, expect: int = 0, timeout: float = 30) -> list[Span]:
        """The spans of one trace, once at least ``expect`` of them arrived (or ``timeout`` passed)."""
        return self._trace_when(lambda: trace_id, expect, timeout, f"trace {trace_id} in Phoenix")

    def _trace_when(self, trace_id_of: Any, expect: int, timeout: float, what: str) -> list[Span]:
        """A trace's spans once its id is known (``trace_id_of``: None until then) and at least ``expect`` of them
        arrived; at ``timeout``, what arrived (none: the timeout is raised)."""
        found: list[Span] = []
        trace_id: str | None = None

        def ready() -> bool:
            nonlocal found, trace_id
            trace_id = trace_id or trace_id_of()
            if trace_id is None:
                return False
            found = [from_phoenix(s) for s in self.all_spans(trace_id=trace_id)]
            return bool(found) and len(found) >= expect

        try:
            wait_until(ready, timeout, what, interval=1.0)
        except TimeoutError:
            if not found:
                raise
        return found


def _prom_api(url: str, query: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": query} | ({"time": f"{at:.3f}"} if at is not None else {})
    status, body = http_get(f"{url}?{urllib.parse.urlencode(params)}", timeout=30)
    assert status == 200, f"query {query!r} failed: {status} {body[:300]!r}"
    return json.loads(body)["data"]["result"]


def _ts(iso: str) -> int:
    t = dt.datetime.fromisoformat(iso)
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000


_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def from_phoenix(s: dict[str, Any]) -> Span:
    """A span as Phoenix's REST API returns it, in the report's model (Phoenix gives no resource)."""
    return Span(s["context"]["trace_id"], s["context"]["span_id"], s.get("parent_id"), s["name"],
                _ts(s["start_time"]), _ts(s["end_time"]), s.get("attributes") or {}, {},
                status=_STATUS.get(s.get("status_code", "UNSET"), 0), status_message=s.get("status_message") or "",
                events=s.get("events") or [])


