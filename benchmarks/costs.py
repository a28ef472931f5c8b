"""Overhead of the instrumentation, measured side by side in one run (never asserted in tests).

1. Added interpreter start per Python process: `opentelemetry-instrument python -c pass` with our
   instrumentor enabled vs disabled (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup), interleaved pairs.
   This is what every helper process (resource tracker, compile workers) pays. And against plain
   `python -c pass`: what OpenTelemetry's launcher and auto-instrumentation cost every process started under
   `opentelemetry-instrument` (the API server and each spawned vLLM process pay it on the critical path).
2. The resource sampler's steady-state CPU cost at 10 Hz (API server and EngineCore/worker kinds). The same way,
   the in-progress machinery of a start (agent/live/progress.py: its thread at the default interval, the gauges read at
   each metrics export, the API server's estimate, progress message and status server): an otherwise idle API
   server runtime in a fresh process with it on vs off (sampler off in both), the CPU difference per second.
3. Whole-start overhead: the same real `opentelemetry-instrument vllm serve` of the tiny model, with and
   without our instrumentor, alternating (order flipped every pair), warm caches, stopwatch spawn -> first
   200 on /health. Median of the per-pair ratios.

    python -m benchmarks costs [--interp 40] [--sampler 20] [--starts 3] [--mode eager|compiled] [--out FILE]
Run it with the e2e venv's python (tests/e2e/bootstrap.sh).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import command_parser
from benchmarks.gpu_probe import sampler_cost
from benchmarks.pairs import clean_env, rotated
from benchmarks.stats import median_diff
from support import harness

REPO = Path(__file__).resolve().parents[1]

DISABLED = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}
WAIT = re.compile(r"\[vllm-otel-startup\] (\w+) pid \d+ ready-point wait ([\d.]+) ms")


def interp(n: int) -> dict:
    bindir = Path(sys.executable).parent
    base = clean_env()
    cmd = [str(bindir / "opentelemetry-instrument"), sys.executable, "-c", "pass"]
    on, off = [], []
    for i in range(n):
        for enabled in rotated((True, False), i):
            env = dict(base) if enabled else dict(base, **DISABLED)
            t = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            (on if enabled else off).append(time.perf_counter() - t)
    return {"runs_each": n, "median_on_ms": 1e3 * statistics.median(on), "median_off_ms": 1e3 * statistics.median(off),
            "added_ms": 1e3 * median_diff(on, off)}


def bootstrap(n: int) -> dict:
    """`python -c pass` plain vs under `opentelemetry-instrument` (this package enabled), interleaved."""
    bindir = Path(sys.executable).parent
    base = clean_env()
    plain, otel = [], []
    for i in range(n):
        for instrumented in rotated((True, False), i):
            cmd = ([str(bindir / "opentelemetry-instrument")] if instrumented else []) + [sys.executable, "-c", "pass"]
            t = time.perf_counter()
            subprocess.run(cmd, env=base, check=True)
            (otel if instrumented else plain).append(time.perf_counter() - t)
    return {"runs_each": n, "median_plain_ms": 1e3 * statistics.median(plain),
            "median_instrumented_ms": 1e3 * statistics.median(otel),
            "added_ms": 1e3 * median_diff(otel, plain)}


HOOK_COST = """
import time, opentelemetry.instrumentation.instrumentor, opentelemetry.sdk.trace, wrapt  # loaded by then
t = time.perf_counter()
from vllm_otel_startup import VllmStartupInstrumentor
VllmStartupInstrumentor().instrument(skip_dep_check=True)
print(time.perf_counter() - t)
"""


def hook_cost(n: int) -> dict:
    """Our share alone, inside fresh `python -c` processes (an 'other' process: classify and return);
    the paired whole-interpreter figure above is dominated by the SDK's own start-up and its noise."""
    import compileall

    # as after `pip install` (which writes bytecode): an editable checkout under PYTHONDONTWRITEBYTECODE=1
    # would otherwise recompile our sources in every process
    compileall.compile_dir(str(REPO / "src" / "vllm_otel_startup"), quiet=1)
    base = clean_env()
    runs = [float(subprocess.run([sys.executable, "-c", HOOK_COST], env=base, check=True, capture_output=True,
                                 text=True).stdout) for _ in range(n)]
    return {"runs": n, "median_ms": 1e3 * statistics.median(runs), "max_ms": 1e3 * max(runs)}


def call_cost(n: int = 20000) -> dict:
    """Cost of one patched call that opens and ends a span (our wrapper + processor + batch export queue),
    against the bare call, in this process. Times the spans one start emits gives the work we add."""
    import wrapt
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from vllm_otel_startup.agent.assembly import assemble
    from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
    from vllm_otel_startup.agent.foundation.patch_points import PatchPoint
    from vllm_otel_startup.agent.foundation.process import ProcessInfo
    from vllm_otel_startup.agent.patching.hooks import Installer

    with tempfile.TemporaryDirectory() as d:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(StartupFileExporter(d), max_queue_size=n + 10))
        now = time.time_ns()
        rt = assemble(ProcessInfo("worker", os.getpid(), now, "proc", now, ["bench"]), provider, hooks=False).rt
        tracer = rt.tracer
        point = PatchPoint("bench:noop", "Load weights", "weights_load", "any")

        def noop():
            return None

        wrapped = wrapt.FunctionWrapper(noop, Installer(rt, tracer)._wrapper(point, emit_span=True, is_async=False))
        t = time.perf_counter()
        for _ in range(n):
            noop()
        bare = (time.perf_counter() - t) / n
        t = time.perf_counter()
        for _ in range(n):
            wrapped()
        traced = (time.perf_counter() - t) / n
        rt.detach()
        provider.shutdown()
    return {"calls": n, "per_call_us": 1e6 * (traced - bare)}


def process_rss(api_pid: int) -> dict[str, int]:
    """Resident memory of the API server, its EngineCore and its worker(s) at ready, told apart by their place
    in the process tree (titles and our spawn environment differ between the two arms)."""
    import psutil

    def kids(p: psutil.Process) -> list[psutil.Process]:
        return [c for c in p.children() if "resource_tracker" not in " ".join(c.cmdline())]

    out: dict[str, int] = {}
    try:
        api = psutil.Process(api_pid)
        out["api_server"] = api.memory_info().rss
        for core in kids(api):
            out["engine_core"] = core.memory_info().rss
            for worker in kids(core):
                out["worker"] = worker.memory_info().rss
    except psutil.Error:
        pass
    return out


def starts(n: int, mode: str, workdir: Path) -> dict:
    model = workdir / "tiny-model"
    if not model.exists():
        subprocess.run([sys.executable, str(REPO / "support/make_tiny_model.py"), str(model)],
                       check=True, capture_output=True)
    args = ["--enforce-eager"] if mode == "eager" else []
    cache = workdir / f"cache-{mode}"
    # warm every cache once (modelinfo, inductor) so both arms see the same state
    harness.serve(model, cache, None, args=args, files=workdir / "starts")
    pairs, rss, waits = [], {"on": [], "off": []}, []
    for i in range(n):
        row = {}
        for enabled in rotated((True, False), i):
            arm = "on" if enabled else "off"
            st = harness.serve(model, cache, None, args=args, files=workdir / "starts",
                               env={"OTEL_PYTHON_VLLM_STARTUP_DEBUG": "1"} if enabled else DISABLED,
                               on_ready=lambda proc, arm=arm: rss[arm].append(process_rss(proc.pid)))
            row[arm] = (st.ready_ns - st.spawn_ns) / 1e9
            if enabled:
                waits.append({k: float(ms) for k, ms in WAIT.findall(st.log)})
        pairs.append(row)
        print(f"  pair {i + 1}: on {row['on']:.2f}s off {row['off']:.2f}s", flush=True)
    ratios = [p["on"] / p["off"] for p in pairs]
    kinds = sorted({k for r in rss["on"] + rss["off"] for k in r})
    added = {k: median_diff([r.get(k, 0) for r in rss["on"]], [r.get(k, 0) for r in rss["off"]]) for k in kinds}
    return {"mode": mode, "pairs": pairs, "median_ratio": statistics.median(ratios),
            "median_on_s": statistics.median(p["on"] for p in pairs),
            "median_off_s": statistics.median(p["off"] for p in pairs),
            "rss_added_mb": {k: round(v / 1e6, 1) for k, v in added.items()},
            "rss_mb": {arm: [{k: round(v / 1e6, 1) for k, v in r.items()} for r in rows] for arm, rows in rss.items()},
            "ready_point_wait_ms": {k: statistics.median(w.get(k, 0) for w in waits) for k in kinds}}


LIVE_CHILD = """
import os, sys, time
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from vllm_otel_startup.agent.assembly import assemble
from vllm_otel_startup.agent.foundation.process import ProcessInfo
from vllm_otel_startup.agent.runtime import Runtime

import threading
metrics.set_meter_provider(MeterProvider([PeriodicExportingMetricReader(
    ConsoleMetricExporter(out=open(os.devnull, "w")), 3_600_000)]))
if sys.argv[3] == "off":  # no in-progress state at all: no thread, no server, no gauges
    Runtime._start_live = lambda self: None


def export():  # the start's metrics export every METRICS_FLUSH_MS (the sampler's thread does it in a real start)
    while True:
        time.sleep(5)
        metrics.get_meter_provider().force_flush()


threading.Thread(target=export, daemon=True).start()
p = TracerProvider()
now = time.time_ns()
info = ProcessInfo(kind="api_server", pid=os.getpid(), create_ns=now, create_source="proc", hook_ns=now,
                   argv=["vllm", "serve", "/work/recorded/tiny-model"])
rt = assemble(info, p, hooks=False).rt  # the runtime as the instrumentor builds it, vLLM unpatched
rt.facts.update({"vllm.enforce_eager": False})
span = rt.tracer.start_span("torch.compile")  # a start held in one phase
time.sleep(float(sys.argv[1]))  # setup: the first ticks (history read once) are not counted
c0, t0 = time.process_time(), time.monotonic()
time.sleep(float(sys.argv[2]))
print(time.process_time() - c0, time.monotonic() - t0)
assert (rt.live is not None) == (sys.argv[3] == "on")
"""


def settings_interval() -> str:
    from vllm_otel_startup import settings

    return settings.LIVE_INTERVAL_MS.default


def live_cost(seconds: float) -> dict:
    """CPU per second of an idle API-server runtime held in one phase, exporting its metrics every 5 s: in-progress
    machinery on (default interval, status server, history from tests/data/starts/dev) vs off (none of it: no
    thread, no server, no gauges); sampler off in both. Alternating runs."""
    base = clean_env()
    base.update(PYTHONPATH=str(REPO / "src"), OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ="0")
    out: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="vos-live-") as d:
        for i in range(4):
            for mode in rotated(("off", "on"), i):
                env = dict(base, TMPDIR=d, OTEL_PYTHON_VLLM_STARTUP_DIR=str(Path(d) / "starts"))
                if mode == "on":
                    env.update(OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT=f"127.0.0.1:{harness.free_port()}",
                               OTEL_PYTHON_VLLM_STARTUP_HISTORY=str(REPO / "tests/data/starts/dev"))
                r = subprocess.run([sys.executable, "-c", LIVE_CHILD, "6", str(seconds / 4), mode], env=env, check=True,
                                   capture_output=True, text=True)
                cpu, wall = map(float, r.stdout.split()[-2:])
                out[mode].append(cpu / wall)
    on, off = statistics.median(out["on"]), statistics.median(out["off"])
    return {"seconds_each": seconds, "cpu_per_s_on": on, "cpu_per_s_off": off, "share_of_one_core": on - off,
            "runs": out}


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("costs", __doc__)
    ap.add_argument("--interp", type=int, default=40, help="pairs of `python -c pass` runs")
    ap.add_argument("--sampler", type=float, default=20, help="seconds of sampler measurement (0 to skip)")
    ap.add_argument("--starts", type=int, default=3, help="pairs of real vllm serve starts (0 to skip)")
    ap.add_argument("--live", type=float, default=0, help="seconds of in-progress measurement, each mode (0 to skip)")
    ap.add_argument("--mode", choices=["eager", "compiled"], default="eager")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    result: dict = {}
    if args.interp:
        print(f"interpreter start, {args.interp} interleaved pairs ...", flush=True)
        result["interpreter"] = r = interp(args.interp)
        print(f"  enabled {r['median_on_ms']:.1f} ms, disabled {r['median_off_ms']:.1f} ms, "
              f"added {r['added_ms']:+.1f} ms")
        result["bootstrap"] = b = bootstrap(max(5, args.interp // 4))
        print(f"  plain python {b['median_plain_ms']:.1f} ms, under opentelemetry-instrument "
              f"{b['median_instrumented_ms']:.1f} ms: OpenTelemetry's bootstrap {b['added_ms']:+.1f} ms per process")
        result["hook"] = h = hook_cost(args.interp)
        print(f"  our instrumentor in a non-vLLM process: median {h['median_ms']:.2f} ms, max {h['max_ms']:.2f} ms")
    result["call"] = c = call_cost()
    print(f"  one traced call (span open/close, processor, export queue): {c['per_call_us']:.1f} us")
    if args.sampler:
        for host in (True, False):
            result[f"sampler_{'host' if host else 'process'}"] = m = sampler_cost(args.sampler, host)
            print(f"  sampler at 10 Hz, {'API server' if host else 'EngineCore/worker'}: "
                  f"{100 * m['share_of_one_core']:.3f} % of one core ({m['samples']} samples, NVML={m['nvml']})")
    if args.live:
        result["live"] = lv = live_cost(args.live)
        print(f"  in-progress state (API server, {settings_interval()} ms interval, status server on): "
              f"{100 * lv['share_of_one_core']:.3f} % of one core (on {100 * lv['cpu_per_s_on']:.3f} %, "
              f"off {100 * lv['cpu_per_s_off']:.3f} %)")
    if args.starts:
        print(f"whole start ({args.mode}), {args.starts} pairs ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="vos-bench-") as d:
            result["start"] = s = starts(args.starts, args.mode, Path(d))
        print(f"  median ratio with/without {s['median_ratio']:.4f} "
              f"({100 * (s['median_ratio'] - 1):+.2f} %); medians {s['median_on_s']:.2f}s vs {s['median_off_s']:.2f}s")
        print(f"  resident memory added at ready (MB, medians): {s['rss_added_mb']}")
        print(f"  ready-point waits (ms, medians, no collector: the local file): {s['ready_point_wait_ms']}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
