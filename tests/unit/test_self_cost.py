"""The agent's self-cost line (OTEL_PYTHON_VLLM_STARTUP_DEBUG): what each of its threads and hooks cost a process,
in the form scripts/overhead_pairs.py reads back from a serve log (issue 25)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from vllm_otel_startup.agent import self_cost

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import overhead_pairs  # noqa: E402


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
    line = self_cost.line("engine_core", cost, Retro())
    stop.set()
    t.join()
    parsed = overhead_pairs.self_cost(line)
    assert parsed["engine_core.gc_callbacks"] == 12 and parsed["engine_core.imports_watched"] == 345
    assert parsed["engine_core.span_processor_s"] >= 0.002
    assert parsed["engine_core.agent_threads_s"] >= parsed.get("engine_core.vllm-otel-startup-sampler_s", 0) > 0


def test_the_pair_statistics_match_the_issue_figures():
    """Issue 25's eleven H100 pairs: median 1.095, geometric mean 1.093, slower in 10 of 11 (sign test p = 0.012)."""
    s = overhead_pairs.summary([1.011, 1.096, 0.940, 1.109, 1.318, 1.095, 1.139, 1.009, 1.020, 1.092, 1.252])
    assert s["median"] == 1.095 and round(s["geomean"], 3) == 1.093
    assert s["slower_in"] == 10 and round(s["sign_p"], 3) == 0.012
    assert s["ci95_low"] <= s["median"] <= s["ci95_high"]


def test_vllm_log_figures_and_first_lines_are_read_from_its_own_lines():
    log = (
        "(Worker pid=7) INFO 2026-11-26 10:00:05.250 [VllmWorker-0 pid=7] [x.py:1] Loading weights took 1.90 seconds\n"
        "INFO 2026-11-26 10:00:01.500 [MainProcess pid=5] [x.py:1] vLLM API server version 0.26.0\n"
        "(EngineCore pid=6) INFO 2026-11-26 10:00:03.000 [EngineCore pid=6] [x.py:1] Initializing\n"
        "(Worker pid=7) Capturing CUDA graphs (FULL): 100%|##########| 51/51 [00:01<00:00, 34.20it/s]\n"
        "(EngineCore pid=6) INFO 2026-11-26 10:00:09.000 [EngineCore pid=6] [core.py:1] init engine (profile, "
        "create kv cache, warmup model) took 13.25 s (compilation: 3.9 s)\n")
    f = overhead_pairs.figures(log)
    assert f == {"weights_load_s": 1.9, "init_engine_s": 13.25, "capture_full_it_s": 34.2}
    spawn_ns = int((1795687200 + 0.5) * 1e9)  # 2026-11-26 10:00:00.500 UTC
    first = overhead_pairs.first_lines(log, spawn_ns)
    assert first == {"Worker": 4.75, "launcher": 1.0, "EngineCore": 2.5}
