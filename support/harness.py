"""Real vLLM starts for the end-to-end tests, the benchmarks and the recorded corpus: ``serve`` (a real
``vllm serve`` of a model, plain or instrumented, exporting to the real backends of support/backends.py and to
the local start file), an engine script's start, and what a start left behind (its log, its processes, its spans).
The backends and the loopback helpers (support/net.py) are re-exported here: the tests' one bench.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from support.backends import E2E_HOME, K8S, Backends
from support.backends import METRICS_PATH as METRICS_PATH  # re-exported: the tests' one bench
from support.backends import PKG_BIN as PKG_BIN
from support.backends import REPO as REPO
from support.net import free_port as free_port
from support.net import http_get as http_get
from support.net import stop_process as stop_process
from support.net import wait_until as wait_until
from support.start_pool import SLOTS, label
from vllm_otel_startup.cli.report import Span, load

VENV = E2E_HOME / "venv-vllm"


# ---- vLLM starts ---------------------------------------------------------------------------------------
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
    # benchmark (python -m benchmarks overhead) sets it back to torch's default: it measures the natural start.
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
                stop_process(proc, signal.SIGTERM, timeout=60)
    ended_ns = time.time_ns()
    _ledger(name, args, instrument, spawn_ns, ready_ns, ended_ns, proc.returncode)
    if expect_ready and ready_ns is None:
        raise AssertionError(f"vllm serve did not become ready; log:\n{log_path.read_text()[-4000:]}")
    return Start(proc.pid, spawn_ns, ready_ns, proc.returncode, log_path.read_text(errors="replace"), files,
                 name, namespace, scraped_at, ended_ns)


ENGINE_SCRIPT = Path(__file__).with_name("engine_script.py")


def run_engine_script(model: Path, cache: Path, backends: Backends | None, *, mode: str = "llm",
                      instrument: bool = True, env: dict[str, str] | None = None, timeout: float = 600,
                      hold_s: float = 3.0, name: str | None = None, venv: Path = VENV, count: int = 1) -> Start:
    """The engine started in the user's own process, as a script or an RL framework does (support/engine_script.py:
    ``vllm.LLM(...)``, or ``AsyncLLM`` with ``mode="async_llm"``), run as ``opentelemetry-instrument python`` (or
    plain ``python``: ``instrument=False``); ready when the script prints READY (its engine is built), and the
    script stays ``hold_s`` more (a program goes on to use its engine) before it exits on its own. ``count``: engines
    built one after another (``llm``): ready at the first READY, the process runs on until it exits."""
    name = name or f"{cache.name}-{mode}"
    files = cache / "starts"
    cache.mkdir(parents=True, exist_ok=True)
    e = start_env(cache, files, name, "vllm", backends, venv=venv, env=env)
    cmd = [str(venv / "bin/python"), str(ENGINE_SCRIPT), mode, str(model), str(hold_s), str(count)]
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
            stop_process(proc, signal.SIGTERM, timeout=60)
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
