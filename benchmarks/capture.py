"""What each of the agent's components does to CUDA-graph capture, measured on a GPU (issue 25).

Real starts showed FULL CUDA-graph capture ~20 % slower with the agent, in pairs too noisy (±4 % a pair) to tell a
0.5 % component apart. This isolates capture: one process captures ``--graphs`` CUDA graphs (``--repeat`` times)
of a 32-layer bf16 model with a decoder layer's op count (vLLM's way: a warm-up run, then the capture into one
shared memory pool, ``gc.collect`` and
``torch.cuda.empty_cache`` patched out as vLLM's capture does) and times each round, while one arm of the agent's
running parts is on. Arms alternate within every round (rotated order), so each ratio is taken side by side:

- ``base``: nothing of ours;
- ``api_sampler``: a second process runs the API server's sampler exactly (agent/resources/sampler.py, ``host=True``:
  /proc at 10 Hz, NVML device readings at 2 Hz) — NVML calls from another process while this one captures;
- ``api_nvml_10hz``: the same with NVML read at 10 Hz (how sensitive capture is to the driver calls);
- ``worker_sampler``: this process's own sampler (``host=False``, 10 Hz), as in an EngineCore or worker;
- ``watchers``: the garbage-collection callback and import watcher (agent/resources/retro_spans.py);
- ``sdk_threads``: the SDK's batch span processor and periodic metric reader threads, idle as during capture;
- ``all``: every one of the above at once;
- ``nvml_loaded``: NVML initialised in this process (as the agent's sampler does in an EngineCore or worker once
  its CUDA context exists) and left idle. NVML cannot be unloaded from a process: give this arm a process of its
  own (``--arms nvml_loaded``) and compare with processes that never load it (``--arms base``), alternating.

Also timed: one per-span resource snapshot (``Sampler.snapshot``: CPU, I/O, this process's GPU memory) with a CUDA
context, the cost the agent pays at each phase span's start and end. ``--nvml-only``: just that reading where NVML
lists the process (an EngineCore's source: NVML's process list through pynvml).

Runs where torch sees a GPU: ``PYTHONPATH=src python -m benchmarks capture [--rounds 6] [--out FILE]``
(opentelemetry-api/-sdk/-instrumentation importable). Prints a table of each arm's median round time and its
median paired ratio to ``base``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

from benchmarks import command_parser

ARMS = ("base", "api_sampler", "api_nvml_10hz", "worker_sampler", "watchers", "sdk_threads", "all")
EXTRA_ARMS = ("nvml_loaded",)


def sizes(n: int) -> list[int]:
    """vLLM's capture sizes for a 512-token budget: 1, 2, 4, then steps of 8 and 16 (51 in all)."""
    out = [1, 2, 4, *range(8, 257, 8), *range(272, 513, 16)]
    return out[:n]


# ---- the parts of the agent, each a context manager --------------------------------------------------------------
@contextmanager
def api_sampler(hz: str, gpu_hz: str):
    """The API server's sampler, in a process of its own (it never holds a CUDA context)."""
    env = dict(os.environ, OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ=hz, OTEL_PYTHON_VLLM_STARTUP_GPU_SAMPLE_HZ=gpu_hz)
    proc = subprocess.Popen([sys.executable, __file__, "--poller"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "polling"  # its NVML is loaded and the first readings taken
    try:
        yield
    finally:
        proc.stdin.close()
        proc.wait(10)


def poller() -> None:
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=True)
    s.start()
    deadline = time.monotonic() + 5
    while (s.nvml is None or not s.gpu) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("polling", flush=True)
    sys.stdin.read()  # until the bench closes the pipe
    print(f"readings: {len(s.times)} samples, gpus {len(s.gpu)}", file=sys.stderr)


@contextmanager
def worker_sampler():
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=False)
    s.start()
    try:
        yield
    finally:
        s.stop_after(0.0)
        s.join(2)


@contextmanager
def watchers():
    from opentelemetry import trace

    from vllm_otel_startup.agent.resources.retro_spans import RetroSpans

    r = RetroSpans(trace.get_tracer("bench"))
    r.install()
    try:
        yield
    finally:
        r.uninstall()


@contextmanager
def sdk_threads():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter  # noqa: F401 - imported as in a start

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(InMemorySpanExporter(), schedule_delay_millis=500))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader(), PeriodicExportingMetricReader(
        _NullMetricExporter(), export_interval_millis=5000)])
    try:
        yield
    finally:
        tp.shutdown()
        mp.shutdown()


class _NullMetricExporter:
    def __new__(cls):
        from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

        class Null(MetricExporter):
            def export(self, metrics_data, timeout_millis=10_000, **kw):
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis=10_000):
                return True

            def shutdown(self, timeout_millis=30_000, **kw):
                pass

        return Null()


@contextmanager
def nvml_loaded():
    import pynvml

    pynvml.nvmlInit()
    yield


def parts(arm: str) -> list[Any]:
    on = {"api_sampler": [lambda: api_sampler("10", "2")], "api_nvml_10hz": [lambda: api_sampler("10", "10")],
          "worker_sampler": [worker_sampler], "watchers": [watchers], "sdk_threads": [sdk_threads],
          "base": [], "nvml_loaded": [nvml_loaded]}
    if arm == "all":
        return [*on["api_sampler"], worker_sampler, watchers, sdk_threads]
    return on[arm]


# ---- capture -----------------------------------------------------------------------------------------------------
def capture_round(model: Any, n: int, torch: Any, repeat: int = 1) -> float:
    """Capture ``n`` graphs (``repeat`` times over) as vLLM does; seconds from the first warm-up to the last
    capture's end."""
    pool = torch.cuda.graph_pool_handle()
    graphs = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with mock.patch("gc.collect", lambda *a: 0), mock.patch("torch.cuda.empty_cache", lambda: None):
        for bs in [b for _ in range(repeat) for b in reversed(sizes(n))]:  # largest first, as vLLM captures
            x = torch.randn(bs, 1024, device="cuda", dtype=torch.bfloat16)
            model(x)  # warm-up run (vLLM: cudagraph_num_of_warmups = 1)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                model(x)
            graphs.append(g)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    del graphs
    return elapsed


class _Layer:
    """A decoder layer's kernel count in Python ops (norm, projections, activation, residual adds): what makes
    capture cost CPU time per graph, as vLLM's forward pass does."""

    def __new__(cls, torch: Any) -> Any:
        class Layer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.n1, self.n2 = torch.nn.LayerNorm(1024), torch.nn.LayerNorm(1024)
                self.qkv, self.o = torch.nn.Linear(1024, 3072, bias=False), torch.nn.Linear(1024, 1024, bias=False)
                self.up, self.down = torch.nn.Linear(1024, 4096, bias=False), torch.nn.Linear(2048, 1024, bias=False)

            def forward(self, x: Any) -> Any:
                q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
                x = x + self.o(torch.sigmoid(q * k) * v)
                g, u = self.up(self.n2(x)).chunk(2, dim=-1)
                return x + self.down(torch.nn.functional.silu(g) * u)

        return Layer()


def build_model(torch: Any) -> Any:
    return torch.nn.Sequential(*[_Layer(torch) for _ in range(32)]).to("cuda", torch.bfloat16).eval()


def snapshot_cost(torch: Any, calls: int = 200, nvml: Any = None) -> dict[str, float]:
    """One span snapshot; ``nvml``: with that NVML reader, the source fixed by it (``nvml_process`` where NVML lists
    this process, as in an EngineCore)."""
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=False)  # not started: the main thread's own snapshots, as at a span's start and end
    if nvml is not None:
        s.nvml = nvml
        s.gpu_memory_source.fix(nvml)
    s.snapshot()  # fixes this process's GPU memory source, unless ``nvml`` has
    t0 = time.perf_counter()
    for _ in range(calls):
        s.snapshot()
    per = (time.perf_counter() - t0) / calls
    return {"snapshot_us": round(per * 1e6, 1), "gpu_source": str(s.gpu_memory_source.source)}


def nvml_read_cost(torch: Any, calls: int = 300) -> dict[str, Any]:
    """This process's GPU memory as NVML lists it (source ``nvml_process``: an EngineCore's reading at each span's
    start and end), then a whole span snapshot with that source."""
    from vllm_otel_startup.agent.resources import gpu

    torch.zeros(1, device="cuda")  # a CUDA context: NVML lists this process from now on
    nvml, pid = gpu.Nvml(), os.getpid()
    held = nvml.process_memory(pid)
    t0 = time.perf_counter()
    for _ in range(calls):
        nvml.process_memory(pid)
    reading = (time.perf_counter() - t0) / calls
    return {"bytes": held, "reading_us": round(reading * 1e6, 1), **snapshot_cost(torch, calls, nvml)}


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("capture", __doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--graphs", type=int, default=51)
    ap.add_argument("--repeat", type=int, default=3, help="the sizes captured this many times a round")
    ap.add_argument("--arms", nargs="*", default=list(ARMS), choices=[*ARMS, *EXTRA_ARMS])
    ap.add_argument("--pin", type=int, default=None,
                    help="run the capturing thread on this core alone (placement noise off; the parts run anywhere)")
    ap.add_argument("--out", default="")
    ap.add_argument("--nvml-only", action="store_true",
                    help="only the per-span readings where NVML lists this process: NVML's figure, a whole snapshot")
    ap.add_argument("--poller", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.poller:
        poller()
        return 0
    import torch

    if a.nvml_only:
        print(json.dumps({"device": torch.cuda.get_device_name(), **nvml_read_cost(torch)}), flush=True)
        return 0

    every_core = os.sched_getaffinity(0)

    torch.backends.cuda.matmul.allow_tf32 = True
    model = build_model(torch)
    with torch.inference_mode():
        capture_round(model, a.graphs, torch, a.repeat)  # warm-up: kernels chosen, allocator grown
        rows: list[dict[str, Any]] = []
        for r in range(a.rounds):
            order = a.arms[r % len(a.arms):] + a.arms[:r % len(a.arms)]
            for arm in order:
                with ExitStack() as stack:
                    if a.pin is not None:  # the parts' threads and processes may run anywhere
                        os.sched_setaffinity(0, every_core)
                    for part in parts(arm):
                        stack.enter_context(part())
                    time.sleep(0.3)  # threads running, pollers past their first reading
                    gc.collect()
                    if a.pin is not None:  # the capturing thread alone on its core (Linux: this thread only)
                        os.sched_setaffinity(0, {a.pin})
                    s = capture_round(model, a.graphs, torch, a.repeat)
                rows.append({"round": r, "arm": arm, "seconds": s})
                print(f"round {r} {arm:15s} {s:.3f} s ({a.graphs * a.repeat / s:.1f} graphs/s)", flush=True)
        snap = snapshot_cost(torch)
    base = {row["round"]: row["seconds"] for row in rows if row["arm"] == "base"}
    table = []
    for arm in a.arms:
        mine = [row for row in rows if row["arm"] == arm]
        ratios = [row["seconds"] / base[row["round"]] for row in mine if row["round"] in base]
        table.append({"arm": arm, "median_s": statistics.median(x["seconds"] for x in mine),
                      "ratio_median": statistics.median(ratios) if ratios else None,
                      "ratio_min": min(ratios) if ratios else None, "ratio_max": max(ratios) if ratios else None})
    dev = torch.cuda.get_device_name()
    print(f"\n{dev}, {a.graphs} x {a.repeat} graphs a round, {a.rounds} rounds, capturing thread pinned: {a.pin}; "
          f"one per-span snapshot: {snap}")
    print(f"{'arm':15s} {'median s':>9s} {'vs base (median, min-max of paired ratios)':>44s}")
    for t in table:
        rm = t["ratio_median"]
        print(f"{t['arm']:15s} {t['median_s']:9.3f}   {rm:.3f} ({t['ratio_min']:.3f}-{t['ratio_max']:.3f})"
              if rm is not None else f"{t['arm']:15s} {t['median_s']:9.3f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": dev, "graphs": a.graphs, "repeat": a.repeat, "pin": a.pin,
                       "rounds": rows, "table": table, "snapshot": snap}, f,
                      indent=1)
    return 0
