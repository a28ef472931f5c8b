"""GPU-side proof of the torch-level hooks, the NVML sampler and the per-phase GPU memory deltas, on a torch
workload shaped like vLLM's GPU startup (vLLM itself is not installed on the GPU machine):

  Init device        CUDA context
  Load weights       safetensors file -> GPU (bf16 MLP stack)
  torch.compile      Inductor, dynamic batch dimension, FX-graph cache in a fixed directory
  Capture model      CUDA graphs for several batch sizes
  Allocate KV cache  one large allocation

Each phase is a span opened through the global tracer, as vLLM's own ``@instrument`` does, so our span
processor adopts it, runs the phase's probes (compile counters, CUDA-graph count) and attaches the resource
summary (NVML GPU memory delta). The single process plays the API server's part too, so the host-level
NVML sampling (hw.gpu.*) runs in it.

    python -m benchmarks gpu-probe [--out DIR] [--pairs 5] [--layers 24]

1. Two instrumented runs with the same Inductor cache directory: compile miss, then hit.
2. ``--pairs`` paired runs, instrumented and not, order alternating, warm cache: the overhead ratio.
3. The sampler alone at 10 Hz with NVML, in an idle process: its CPU cost.
Prints a summary and writes DIR/gpu_probe.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import command_parser

ROOT = Path(__file__).resolve().parents[1]
SIZES = [2, 4, 8, 16, 32, 64, 128, 256]  # 1 would be specialised by Dynamo (a second compile)
HIDDEN, FFN = 4096, 8192


# ---- child: one start ------------------------------------------------------------------------------------
def setup_instrumentation():
    """Our runtime in this process, exactly as the instrumentor builds it (minus vLLM's patch points)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from vllm_otel_startup.agent.assembly import assemble
    from vllm_otel_startup.agent.foundation.process import ProcessInfo

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    from support.kept_batches import kept_batches_exporter

    reader = kept_batches_exporter()
    metrics.set_meter_provider(MeterProvider(metric_readers=[PeriodicExportingMetricReader(reader, 3_600_000)]))
    info = ProcessInfo.current()
    info.kind = "api_server"
    rt = assemble(info, provider, hooks=False).rt
    return rt, spans, reader


def child(args: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    rt = spans = reader = None
    if args.instrument:
        rt, spans, reader = setup_instrumentation()
    import torch
    from opentelemetry import trace
    from safetensors.torch import load_file

    tracer = trace.get_tracer("vllm.v1.worker.gpu_worker")  # as vLLM's @instrument: the global provider
    torch_mem: dict[str, dict[str, int]] = {}
    phase_s: dict[str, float] = {"setup": time.perf_counter() - t_start}

    def phase(name: str):
        class Phase:
            def __enter__(self):
                torch.cuda.synchronize() if torch.cuda.is_initialized() else None
                self.r0 = torch.cuda.memory_reserved() if torch.cuda.is_initialized() else 0
                self.a0 = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
                self.t0 = time.perf_counter()
                self.cm = tracer.start_as_current_span(name)
                self.cm.__enter__()

            def __exit__(self, *exc):
                torch.cuda.synchronize()
                torch_mem[name] = {"reserved_delta": torch.cuda.memory_reserved() - self.r0,
                                   "allocated_delta": torch.cuda.memory_allocated() - self.a0}
                self.cm.__exit__(*exc)
                phase_s[name] = time.perf_counter() - self.t0
        return Phase()

    with phase("Init device"):
        torch.cuda.init()
        torch.zeros(1, device="cuda")
    with phase("Load weights"):
        weights = load_file(args.weights, device="cuda")
    layers = [(weights[f"l{i}.up"], weights[f"l{i}.down"]) for i in range(args.layers)]

    def model(x):
        for up, down in layers:
            x = x + torch.nn.functional.silu(x @ up) @ down
        return x

    with phase("torch.compile"):
        compiled = torch.compile(model)
        x = torch.randn(SIZES[-1], HIDDEN, device="cuda", dtype=torch.bfloat16)
        torch._dynamo.mark_dynamic(x, 0)
        compiled(x)
    graphs = []
    with phase("Capture model"):
        for bs in SIZES:
            static = torch.randn(bs, HIDDEN, device="cuda", dtype=torch.bfloat16)
            compiled(static)  # warm-up at this size, as vLLM does before capturing
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = compiled(static)
            graphs.append((g, static, out))
    with phase("Allocate KV cache"):
        kv = torch.empty(args.kv_gb * 2**30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    result: dict = {"instrument": args.instrument, "torch": torch_mem, "phase_s": phase_s}
    if rt is not None:
        t = time.perf_counter()
        rt.finish()  # the ready point: metrics recorded, bounded flush
        phase_s["finish"] = time.perf_counter() - t
    result["wall_s"] = time.perf_counter() - t_start  # to ready (the sampler's tail comes after, while serving)
    if rt is not None:
        rt.sampler.join(10)
        result.update(exported(spans, reader))
    del kv, graphs
    return result


def exported(spans, reader) -> dict:
    """What the agent exported in the child: each span's attributes and seconds, the last exported point of every
    metric series, and how many metric batches went out."""
    out: dict = {"spans": {s.name: dict(s.attributes) for s in spans.get_finished_spans()},
                 "durations": {s.name: (s.end_time - s.start_time) / 1e9 for s in spans.get_finished_spans()},
                 "metrics": {}}
    for data in reader.batches:
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out["metrics"][m.name] = [
                        {"attrs": dict(dp.attributes), "value": getattr(dp, "value", getattr(dp, "sum", None))}
                        for dp in m.data.data_points]
    out["metric_batches"] = len(reader.batches)
    return out


def sampler_cost(seconds: float, host: bool = True) -> dict:
    """Steady-state CPU cost of the sampler thread at its default 10 Hz in an otherwise idle process (the
    first seconds, NVML initialisation included, are setup and not counted). ``host``: the API server's
    sampler (process tree, host cores, cgroup, NVML), else the EngineCore's / a worker's (itself only)."""
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=host)
    s.start()
    time.sleep(3)
    c0, n0 = time.process_time(), len(s.times)
    time.sleep(seconds)
    used, samples = time.process_time() - c0, len(s.times) - n0
    s.stop_after(0)
    s.join(5)
    return {"seconds": seconds, "host": host, "cpu_s": used, "share_of_one_core": used / seconds,
            "samples": samples, "nvml": bool(s.nvml and s.nvml.ok), "device_model": s.device_model}


# ---- parent --------------------------------------------------------------------------------------------
def run_child(weights: Path, cache: Path, instrument: bool, layers: int, kv_gb: int, **extra_env: str) -> dict:
    out = cache / f"result-{time.monotonic_ns()}.json"
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"), TRITON_CACHE_DIR=str(cache / "triton"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="1", PYTHONPATH=path, **extra_env)
    subprocess.run([sys.executable, "-m", "benchmarks", "gpu-probe", "--child", "--weights", str(weights),
                    "--result", str(out), "--layers", str(layers), "--kv-gb", str(kv_gb),
                    *(["--instrument"] if instrument else [])], env=env, check=True, cwd=ROOT)
    return json.loads(out.read_text())


def make_weights(path: Path, layers: int) -> None:
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    save_file({f"l{i}.{n}": (torch.randn(*shape, dtype=torch.bfloat16) * 0.02)
               for i in range(layers) for n, shape in (("up", (HIDDEN, FFN)), ("down", (FFN, HIDDEN)))}, str(path))


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("gpu-probe", __doc__)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--instrument", action="store_true")
    ap.add_argument("--weights")
    ap.add_argument("--result")
    ap.add_argument("--out", default=".")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--kv-gb", type=int, default=8)
    ap.add_argument("--sampler-seconds", type=float, default=20)
    ap.add_argument("--cooldown", type=float, default=3)
    a = ap.parse_args(argv)
    if a.child:
        Path(a.result).write_text(json.dumps(child(a), default=str))
        return 0
    work = Path(tempfile.mkdtemp(prefix="gpu-probe-"))
    weights = work / "weights.safetensors"
    make_weights(weights, a.layers)
    report: dict = {"weights_bytes": weights.stat().st_size}
    cold = run_child(weights, work, True, a.layers, a.kv_gb)
    warm = run_child(weights, work, True, a.layers, a.kv_gb)
    report["cold"], report["warm"] = cold, warm
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "gpu_probe.json").write_text(json.dumps(report, indent=1, default=str))
    summarize_compile(report)
    variants = {"off": (False, {}), "on": (True, {})}
    runs: dict[str, list[dict]] = {k: [] for k in variants}
    for i in range(a.pairs):
        for name in list(variants) if i % 2 == 0 else list(reversed(variants)):
            time.sleep(a.cooldown)  # the last run's compile workers and GPU memory are gone
            instrument, env = variants[name]
            r = run_child(weights, work, instrument, a.layers, a.kv_gb, **env)
            runs[name].append(r)
            print(f"pair {i} {name}: wall to ready {r['wall_s']:.2f}s, torch.compile "
                  f"{r['phase_s'].get('torch.compile', 0):.2f}s", flush=True)
    med = {k: statistics.median(r["wall_s"] for r in v) for k, v in runs.items()}
    report["overhead"] = {
        "wall_s": {k: [r["wall_s"] for r in v] for k, v in runs.items()}, "median_wall_s": med,
        "ratio_on_off": med["on"] / med["off"],
        "median_pair_ratio": statistics.median(x["wall_s"] / y["wall_s"]
                                               for x, y in zip(runs["on"], runs["off"], strict=True)),
        "phase_s": {k: [r["phase_s"] for r in v] for k, v in runs.items()},
        "median_phase_s": {k: {p: statistics.median(r["phase_s"].get(p, 0.0) for r in v)
                               for p in v[0]["phase_s"]} for k, v in runs.items()}}
    report["sampler"] = sampler_cost(a.sampler_seconds)
    report["sampler_process"] = sampler_cost(a.sampler_seconds, host=False)
    (Path(a.out) / "gpu_probe.json").write_text(json.dumps(report, indent=1, default=str))
    summarize(report)
    return 0


def summarize_compile(r: dict) -> None:
    print(f"weights: {r['weights_bytes'] / 1e9:.2f} GB", flush=True)
    for run in ("cold", "warm"):
        s = r[run]["spans"]
        c = s.get("torch.compile", {})
        print(f"[{run}] torch.compile {r[run]['durations'].get('torch.compile', 0):.2f}s cache_hit="
              f"{c.get('vllm.compile.cache_hit')} fx hits/misses={c.get('vllm.compile.inductor_cache_hits')}/"
              f"{c.get('vllm.compile.inductor_cache_misses')}; graphs captured="
              f"{s.get('Capture model', {}).get('vllm.cudagraph.count')}")
        for name, mem in r[run]["torch"].items():
            ours = s.get(name, {}).get("vllm.startup.resource.gpu_memory_delta")
            print(f"   {name:18s} NVML delta {ours if ours is None else ours / 2**20:>10.1f} MiB   "
                  f"torch reserved delta {mem['reserved_delta'] / 2**20:>10.1f} MiB")
        hw = {k: v for k, v in r[run]["metrics"].items() if k.startswith("hw.")}
        print(f"   NVML series: {sorted(hw)}", flush=True)


def summarize(r: dict) -> None:
    o = r["overhead"]
    print(f"overhead (median wall to ready): {o['median_wall_s']}; on/off {o['ratio_on_off']:.4f}, "
          f"median pair ratio {o['median_pair_ratio']:.4f}")
    for variant, runs in o["phase_s"].items():
        print(f"   {variant:4s} torch.compile per run: " + ", ".join(f"{r.get('torch.compile', 0):.2f}" for r in runs))
    for variant, phases in o["median_phase_s"].items():
        print(f"   {variant:14s} " + "  ".join(f"{p} {v:.3f}" for p, v in phases.items()))
    for key in ("sampler", "sampler_process"):
        s = r[key]
        print(f"sampler at 10 Hz ({'API server' if s['host'] else 'EngineCore/worker'}, NVML={s['nvml']}): "
              f"{100 * s['share_of_one_core']:.3f} % of one core ({s['samples']} samples); "
              f"device model {s['device_model']}")
