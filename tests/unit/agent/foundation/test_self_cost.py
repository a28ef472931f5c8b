"""The agent's self-cost line (OTEL_PYTHON_VLLM_STARTUP_DEBUG): what each of its threads and hooks cost a process,
in the form the overhead benchmark (benchmarks/vllm_log.py) reads back from a serve log (issue 25)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from benchmarks import vllm_log
from vllm_otel_startup.agent.foundation import self_cost

# The GPU workflow's driver (beside the repository, shared by the projects that use the GPU machines) and the patch
# this repository's GPU benchmarks apply to it; the features the patch brings, which a driver that absorbed it has.
REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
GPU_DRIVER_PATCH = REPO / "benchmarks" / "gpu" / "driver_lanes.diff"
SHARED_GPU_DRIVER = REPO.parent / "shared" / "gpu" / "driver.py"
GPU_DRIVER_FEATURES = ("def sched_stats(", '"vmstat_delta"', 'spec.get("profile")', 'spec.get("launcher", True)',
                       '.replace("@R", str(R))')


def _busy(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def test_a_busy_thread_of_ours_is_counted_under_its_name_with_numbers_folded():
    stop = threading.Event()
    threads = [threading.Thread(target=_busy, args=(stop,), name=f"vllm-otel-startup-probe-{i}") for i in range(2)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while self_cost.thread_cpu().get("vllm-otel-startup-probe", 0.0) < 0.05 and time.monotonic() - t0 < 10:
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    assert self_cost.thread_cpu().get("vllm-otel-startup-probe") is None  # only live threads
    # (the measurement itself: seen above within 10 s)
    assert time.monotonic() - t0 < 10


def test_the_line_reads_back_in_the_overhead_script():
    class Retro:
        gc_calls, imports = 12, 345

    cost = self_cost.MainThreadCost()
    cost.add(time.perf_counter_ns() - 2_000_000)
    stop = threading.Event()
    t = threading.Thread(target=_busy, args=(stop,), name="vllm-otel-startup-sampler")
    t.start()
    time.sleep(0.1)
    class Monitoring:
        unwinds, switches = 3066, 20

    class Nudge:
        flushes = 30

    class Exports:
        exports, spans = 41, 412

    line = self_cost.line("engine_core", cost, Retro(), Monitoring(), Nudge(), Exports())
    stop.set()
    t.join()
    parsed = vllm_log.self_cost(line)
    assert parsed["engine_core.gc_callbacks"] == 12 and parsed["engine_core.imports_watched"] == 345
    assert parsed["engine_core.unwind_callbacks"] == 3066 and parsed["engine_core.unwind_switches"] == 20
    assert (parsed["engine_core.exports"], parsed["engine_core.exported_spans"]) == (41, 412)
    assert parsed["engine_core.exports_after_phase"] == 30
    assert 0 < parsed["engine_core.main_thread_waits"] <= self_cost.main_thread_switches()  # it slept above
    assert parsed["engine_core.span_processor_s"] >= 0.002
    assert parsed["engine_core.agent_threads_s"] >= parsed.get("engine_core.vllm-otel-startup-sampler_s", 0) > 0


def test_the_line_splits_the_samplers_cpu_by_part_of_a_tick(monkeypatch):
    """The sampler's own CPU, per part of a tick (this process's readings, the host's, the tree's discovery and CPU,
    its jobs): the overhead table's component rows, read back by the overhead script."""
    from vllm_otel_startup.agent.resources.sampler import Sampler

    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "50")
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_BUSY_MS", "0")
    sampler = Sampler(host=True)
    ran = []
    sampler.every(0.02, lambda: ran.append(sum(range(20_000))))
    sampler.start()
    t0 = time.monotonic()
    while (sampler.ticks < 10 or not ran) and time.monotonic() - t0 < 10:
        time.sleep(0.02)
    sampler.stop_now(2.0)
    assert sampler.ticks >= 10 and ran
    line = self_cost.line("api_server", None, None, sampler=sampler)
    parsed = vllm_log.self_cost(line)
    assert parsed["api_server.sampler_ticks"] == sampler.ticks >= 10
    assert {"process", "host", "discover", "tree", "jobs"} <= set(sampler.spent)  # CPU ns per part
    assert all(v >= 0 for v in sampler.spent.values()) and sum(sampler.spent.values()) > 0
    for part, ns in sampler.spent.items():  # the line carries each, in seconds, as the overhead script reads it
        assert parsed.get(f"api_server.sampler.{part}_s", 0.0) == pytest.approx(round(ns / 1e9, 3), abs=1e-9)


def _driver_with_the_patch(driver: Path, out: Path) -> str:
    """The driver's source with GPU_DRIVER_PATCH's features, as the GPU workflow needs it: the driver as it is where it
    has every one of them already (the shared driver absorbed the patch), else the patch applied to it into ``out``
    (it must apply). Either way the result compiles and has them all."""
    import subprocess

    src = driver.read_text()
    if not all(f in src for f in GPU_DRIVER_FEATURES):
        subprocess.run(["patch", "-s", "-o", str(out), str(driver), str(GPU_DRIVER_PATCH)],
                       check=True, capture_output=True, text=True)
        src = out.read_text()
    compile(src, str(driver), "exec")
    assert [f for f in GPU_DRIVER_FEATURES if f not in src] == []
    return src


def _shared_driver() -> Path:
    import shutil

    if not SHARED_GPU_DRIVER.exists() or shutil.which("patch") is None:
        pytest.skip(f"no {SHARED_GPU_DRIVER} or no `patch` on this machine")
    return SHARED_GPU_DRIVER


def test_the_gpu_driver_patch_applies_to_the_shared_driver_and_the_result_compiles(tmp_path):
    """GPU_DRIVER_PATCH against ../shared/gpu/driver.py, as the GPU workflow applies it, or the shared driver as it is
    once it has the patch's features."""
    _driver_with_the_patch(_shared_driver(), tmp_path / "driver.py")


def test_a_shared_driver_that_absorbed_the_gpu_driver_patch_passes_unpatched(tmp_path):
    """The shared driver with the patch already in it (here: patched into a copy first): checked as it is, not patched
    a second time (which would fail)."""
    import subprocess

    absorbed = tmp_path / "absorbed.py"
    subprocess.run(["patch", "-s", "-o", str(absorbed), str(_shared_driver()), str(GPU_DRIVER_PATCH)],
                   check=True, capture_output=True, text=True)
    out = tmp_path / "driver.py"
    assert _driver_with_the_patch(absorbed, out) == absorbed.read_text()
    assert not out.exists()


