"""Real backends and real vLLM starts for the end-to-end tests.

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

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.start_pool import SLOTS, label
from vllm_otel_startup.cli.report import Span, load

E2E_HOME = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e"))
VENV = E2E_HOME / "venv-vllm"
BACKENDS = E2E_HOME / "venv-backends"
PKG_BIN = E2E_HOME / "pkgroot/usr/bin"
REPO = Path(__file__).resolve().parents[1]
MIXIN_RULES = REPO / "mixin" / "prometheus_rules.yaml"
RULE_INTERVAL = "2s"


def recording_rules(path: Path, interval: str = RULE_INTERVAL) -> Path:
    """The shipped recording rules (mixin/prometheus_rules.yaml), evaluated every ``interval``."""
    import yaml

    groups = yaml.safe_load(MIXIN_RULES.read_text())["groups"]
    path.write_text(yaml.safe_dump({"groups": [{**g, "interval": interval} for g in groups]}))
    return path


# deploy/'s scrape path: vLLM's prometheus-client mount, which answers OpenMetrics (with the counters' exemplars) to
# Prometheus; `/metrics` is prometheus-fastapi-instrumentator's route, plain text 0.0.4 only (deploy/README.md)
METRICS_PATH = "/metrics/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def wait_until(pred, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


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
        wait_until(lambda: _listening(self.otlp_http), 30, "rotel")
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
            _stop(p)
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
        found: list[Span] = []
        trace_id: str | None = None

        def ready() -> bool:
            nonlocal found, trace_id
            if trace_id is None:
                roots = [from_phoenix(s) for s in self.all_spans(name="vLLM startup")]
                trace_id = next((s.trace_id for s in roots if s.attrs.get("process.pid") == pid), None)
                if trace_id is None:
                    return False
            found = [from_phoenix(s) for s in self.all_spans(trace_id=trace_id)]
            return len(found) >= expect

        try:
            wait_until(ready, timeout, f"the startup trace of pid {pid} in Phoenix", interval=1.0)
        except TimeoutError:
            if not found:
                raise
        return found


def _prom_api(url: str, query: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": query} | ({"time": f"{at:.3f}"} if at is not None else {})
    status, body = http_get(f"{url}?{urllib.parse.urlencode(params)}", timeout=30)
    assert status == 200, f"query {query!r} failed: {status} {body[:300]!r}"
    return json.loads(body)["data"]["result"]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


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


# ---- vLLM starts ---------------------------------------------------------------------------------------
# Every start runs as a pod of one test cluster would (downward-API environment -> k8s.* resource attributes);
# K8S_POD_NAME is the start's own name, K8S_NAMESPACE_NAME its fleet (compiled starts have one of their own).
K8S = {"K8S_CLUSTER_NAME": "e2e", "K8S_NODE_NAME": "ci-node"}
SECRET_API_KEY = "sk-planted-apikey-5f3a9c"
SECRET_HF_TOKEN = "hf_plantedTokenXYZ123456"
SECRET_URL_PASSWORD = "planted-url-password-77"


@dataclass
class Start:
    pid: int
    spawn_ns: int
    ready_ns: int | None
    returncode: int | None
    log: str
    trace_file_dir: Path
    name: str = ""  # k8s.pod.name resource attribute: selects this start's metric series
    namespace: str = "vllm"  # k8s.namespace.name: a fleet
    scraped_at: float | None = None  # when Prometheus scraped its /metrics (unix s)
    ended_ns: int = 0  # when the server had stopped: spawn -> ended is the start's cost to the suite


def local_spans(start: Start) -> list[Span]:
    """Every span in the start's recorded-start files (its local copy of the trace, whatever reached a store)."""
    return [s for f in sorted(start.trace_file_dir.glob("*.jsonl")) for s in load(str(f))]


_SEEDS: dict[Path, Path | None] = {}
_SEED_LOCK = threading.Lock()
_SEED_SCRIPT = ("from vllm.model_executor.models.registry import ModelRegistry\n"
                "assert ModelRegistry._try_inspect_model_cls('LlamaForCausalLM') is not None\n")


def seed_modelinfo(cache: Path, venv: Path = VENV) -> bool:
    """Give the cache root ``cache`` vLLM's model-inspection cache for the tiny model's architecture, as a second
    start on that root would find it: the start skips its model-inspection subprocess (a third import of vLLM,
    ~13 s of one core here). For the starts whose tests do not read that phase. The cache is made once per
    environment (vLLM 0.32's registry, in a scratch cache root); False where it could not be made (the start is
    then cold, as without this)."""
    with _SEED_LOCK:
        if venv not in _SEEDS:
            root = E2E_HOME / "modelinfo-seed" / venv.name
            shutil.rmtree(root, ignore_errors=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VLLM_"))}
            env.update(VLLM_CACHE_ROOT=str(root), VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1")
            r = subprocess.run([str(venv / "bin/python"), "-c", _SEED_SCRIPT], env=env, capture_output=True,
                               timeout=300)
            found = root / "modelinfos"
            _SEEDS[venv] = found if r.returncode == 0 and any(found.glob("*.json")) else None
        seed = _SEEDS[venv]
    if seed is None:
        return False
    shutil.copytree(seed, cache / "vllm" / "modelinfos", dirs_exist_ok=True)
    return True


def start_env(cache: Path, files: Path, name: str, namespace: str, backends: Backends | None, *,
              protocol: str = "http/protobuf", venv: Path = VENV, bin_dir: Path | None = None,
              env: dict[str, str] | None = None, env_first: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a start the suite makes (``vllm serve`` or a script's engine): offline, its own cache
    root, temporary directory and start files, the pod identity of one test cluster, OTLP to ``backends`` (none:
    the local file only), then ``env``; no OTEL_ or VLLM_ variable of the caller's."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VLLM_"))}
    e.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1",
             VLLM_CACHE_ROOT=str(cache / "vllm"), TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
             TMPDIR=str(cache / "tmp"), OTEL_PYTHON_VLLM_STARTUP_DIR=str(files),
             PATH=f"{f'{bin_dir}:' if bin_dir else ''}{venv / 'bin'}:{os.environ.get('PATH', '')}")
    (cache / "tmp").mkdir(exist_ok=True)
    e.update(**K8S, K8S_POD_NAME=name, K8S_NAMESPACE_NAME=namespace)
    # Inductor trusts /proc/cpuinfo's vector instruction sets instead of proving each by building and loading a
    # probe library in `python -c` children: vllm-cpu compiles its sampler (torch.compile) in every start, eager
    # included, and the check cost each start ~8 s warm, ~16 s cold here, none of it ours to explain. The overhead
    # benchmark (scripts/overhead_pairs.py) sets it back to torch's default: it measures the natural start.
    e["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
    if backends is not None:
        ep = (f"http://127.0.0.1:{backends.otlp_grpc}" if protocol == "grpc"
              else f"http://127.0.0.1:{backends.otlp_http}")
        e.update(OTEL_EXPORTER_OTLP_ENDPOINT=ep, OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                 OTEL_TRACES_EXPORTER="otlp,vllm_startup_file")
    e.update(env or {})
    if env_first:  # these variables first in the environment (the order the process gets: execve keeps it)
        e = {**env_first, **{k: v for k, v in e.items() if k not in env_first}}
    return e


def process_titles(pid: int) -> dict[int, str]:
    """pid -> command line (as setproctitle leaves it: ``VLLM::EngineCore``) of ``pid`` and all its descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    out = {}
    for p in procs:
        with contextlib.suppress(psutil.Error):
            out[p.pid] = " ".join(p.cmdline()).strip()
    return out


def process_threads(pid: int) -> list[tuple[str, list[str]]]:
    """Each process of ``pid``'s tree (its title) with its threads' names (``/proc/PID/task/*/comm``, sorted), the
    processes sorted: what a start runs, comparable from one start to the next (pids and thread ids differ)."""
    out = []
    for child, title in process_titles(pid).items():
        with contextlib.suppress(OSError):
            names = sorted(Path(t, "comm").read_text().strip() for t in Path(f"/proc/{child}/task").iterdir())
            out.append((title, names))
    return sorted(out)


def serve(model: Path, cache: Path, backends: Backends | None, *, args: list[str] = (), protocol: str = "http/protobuf",
          env: dict[str, str] | None = None, timeout: float = 600, files: Path | None = None,
          instrument: bool = True, expect_ready: bool = True, port: int | None = None,
          name: str | None = None, namespace: str = "vllm", on_start=None, on_ready=None,
          bin_dir: Path | None = None, venv: Path = VENV, cwd: Path | None = None,
          warm_modelinfo: bool = False, scrape: bool = True, env_first: dict[str, str] | None = None) -> Start:
    """Run ``opentelemetry-instrument vllm serve`` like a user would; stopwatch spawn -> first 200 on /health.
    With backends, Prometheus scrapes the server's /metrics once it is ready, before it is stopped. It runs in one
    of the suite's start slots (support/start_pool.py: at most VOS_PARALLEL_STARTS starts at once) until it is ready
    (or has failed): a ready server idles while it is scraped and stopped.
    ``on_start(proc)`` runs right after the launch (a fault to inject while it starts), ``on_ready(proc)`` once
    it is ready (before it is stopped); ``bin_dir`` goes first on PATH (a wrapper ``vllm``); ``venv``: the
    environment that runs it (default: the e2e environment); ``cwd``: where it runs; ``warm_modelinfo``: the cache
    root holds vLLM's model-inspection cache (:func:`seed_modelinfo`), for a start whose tests do not read it;
    ``scrape=False``: no Prometheus scrape once ready (a benchmark's start); ``env_first``: variables put first in
    the start's environment."""
    port = port or free_port()
    name = name or f"{cache.name}-{port}"
    files = files or (cache / "starts")
    cache.mkdir(parents=True, exist_ok=True)
    e = start_env(cache, files, name, namespace, backends, protocol=protocol, venv=venv, bin_dir=bin_dir, env=env,
                  env_first=env_first)
    vllm = bin_dir / "vllm" if bin_dir else venv / "bin/vllm"
    cmd = [str(vllm), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "256", "--dtype", "float32", *args]
    if instrument:
        cmd = [str(venv / "bin/opentelemetry-instrument"), *cmd]
    log_path = cache / f"serve-{port}.log"
    slot = contextlib.ExitStack()
    with slot:  # closed early, once the server is ready or gone; here on any error before
        slot.enter_context(SLOTS.one())
        if warm_modelinfo:
            seed_modelinfo(cache, venv)
        with open(log_path, "wb") as log:
            spawn_ns = time.time_ns()
            proc = subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
            if on_start is not None:
                on_start(proc)
            ready_ns = scraped_at = None
            deadline = time.monotonic() + timeout
            try:
                while time.monotonic() < deadline and proc.poll() is None:
                    if http_get(f"http://127.0.0.1:{port}/health", timeout=1)[0] == 200:
                        ready_ns = time.time_ns()
                        break
                    time.sleep(0.02)
                slot.close()  # a ready server idles (~0.1 core here) while it is scraped and stopped
                if ready_ns is not None and on_ready is not None:
                    on_ready(proc)
                if ready_ns is not None and backends is not None and instrument and scrape:
                    scraped_at = backends.scrape(name, port, namespace=namespace)
            finally:
                slot.close()
                # SIGTERM to the API server alone stops the whole tree cleanly (vllm-on-cpu.md).
                _stop(proc, signal.SIGTERM, timeout=60)
    ended_ns = time.time_ns()
    _ledger(name, args, instrument, spawn_ns, ready_ns, ended_ns, proc.returncode)
    if expect_ready and ready_ns is None:
        raise AssertionError(f"vllm serve did not become ready; log:\n{log_path.read_text()[-4000:]}")
    return Start(proc.pid, spawn_ns, ready_ns, proc.returncode, log_path.read_text(errors="replace"), files,
                 name, namespace, scraped_at, ended_ns)


ENGINE_SCRIPT = Path(__file__).with_name("engine_script.py")


def run_engine_script(model: Path, cache: Path, backends: Backends | None, *, mode: str = "llm",
                      instrument: bool = True, env: dict[str, str] | None = None, timeout: float = 600,
                      hold_s: float = 3.0, name: str | None = None, venv: Path = VENV) -> Start:
    """The engine started in the user's own process, as a script or an RL framework does (support/engine_script.py:
    ``vllm.LLM(...)``, or ``AsyncLLM`` with ``mode="async_llm"``), run as ``opentelemetry-instrument python`` (or
    plain ``python``: ``instrument=False``); ready when the script prints READY (its engine is built), and the
    script stays ``hold_s`` more (a program goes on to use its engine) before it exits on its own."""
    name = name or f"{cache.name}-{mode}"
    files = cache / "starts"
    cache.mkdir(parents=True, exist_ok=True)
    e = start_env(cache, files, name, "vllm", backends, venv=venv, env=env)
    cmd = [str(venv / "bin/python"), str(ENGINE_SCRIPT), mode, str(model), str(hold_s)]
    if instrument:
        cmd = [str(venv / "bin/opentelemetry-instrument"), *cmd]
    log_path = cache / f"script-{mode}.log"
    with SLOTS.one(), open(log_path, "wb") as log:
        seed_modelinfo(cache, venv)
        spawn_ns = time.time_ns()
        proc = subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        ready_ns, deadline = None, time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and proc.poll() is None and ready_ns is None:
                m = re.search(rb"^READY (\d+)$", log_path.read_bytes(), re.M)
                ready_ns = int(m.group(1)) if m else None
                time.sleep(0.05)
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGTERM, timeout=60)
        if ready_ns is None:
            m = re.search(rb"^READY (\d+)$", log_path.read_bytes(), re.M)
            ready_ns = int(m.group(1)) if m else None
    ended_ns = time.time_ns()
    _ledger(name, [mode], instrument, spawn_ns, ready_ns, ended_ns, proc.returncode)
    return Start(proc.pid, spawn_ns, ready_ns, proc.returncode, log_path.read_text(errors="replace"), files, name,
                 "vllm", None, ended_ns)


LEDGER_ENV = "VOS_START_LEDGER"  # tests/run.sh: every real start of the run, a JSON line each (support/run_summary.py)


def _ledger(name: str, args, instrument: bool, spawn_ns: int, ready_ns: int | None, ended_ns: int,
            returncode: int | None) -> None:
    """One line per real `vllm serve` the suite made: which test (or pool job), how long to ready, how long in all."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    test = label() or os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    row = {"test": test, "name": name, "args": list(args), "instrumented": instrument, "spawn": spawn_ns / 1e9,
           "ready_s": round((ready_ns - spawn_ns) / 1e9, 2) if ready_ns else None,
           "wall_s": round((ended_ns - spawn_ns) / 1e9, 2), "returncode": returncode}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


# vLLM's own timing log lines and the phase each one measures (vLLM 0.32).
LOG_TIMINGS = {
    "Loading weights took": (re.compile(r"Loading weights took ([\d.]+) seconds"), "Load weights"),
    "Initializing model took": (re.compile(r"Initializing model took ([\d.]+) seconds"), "Create model"),
    "init engine": (re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
                    "Prepare model"),
}


def process_kind(p) -> str | None:
    """engine_core / worker for a psutil.Process of a start: by the process title vLLM sets (`VLLM::Worker`),
    else by the kind we handed it at spawn (setproctitle overwrites /proc/PID/environ when it retitles, and
    does not always retitle); the resource tracker inherits the spawn environment but is neither."""
    import psutil

    try:
        cmd = " ".join(p.cmdline())
        if "resource_tracker" in cmd:
            return None
        if "VLLM::EngineCore" in cmd or "VLLM::Worker" in cmd:
            return "engine_core" if "EngineCore" in cmd else "worker"
        return p.environ().get("OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND") or None
    except psutil.Error:
        return None


def worker_of(api_pid: int):
    """The worker process (psutil) of the start whose API server is ``api_pid``, or None."""
    import psutil

    try:
        procs = psutil.Process(api_pid).children(recursive=True)
    except psutil.Error:
        return None
    return next((p for p in procs if process_kind(p) == "worker"), None)


def python() -> str:
    return str(VENV / "bin/python") if (VENV / "bin/python").exists() else sys.executable


def make_tiny_model(out: Path, *args: str) -> Path:
    """Build the tiny random-weight Llama at ``out`` offline (support/make_tiny_model.py; ``args``: its options,
    e.g. ``--vocab 200000``), with the e2e environment's Python."""
    subprocess.run([python(), str(Path(__file__).parent / "make_tiny_model.py"), str(out), *args], check=True,
                   capture_output=True)
    return out
