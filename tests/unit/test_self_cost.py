"""The agent's self-cost line (OTEL_PYTHON_VLLM_STARTUP_DEBUG): what each of its threads and hooks cost a process,
in the form scripts/overhead_pairs.py reads back from a serve log (issue 25)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from vllm_otel_startup.agent.foundation import self_cost

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import overhead_pairs  # noqa: E402

# The GPU workflow's driver (beside the repository, shared by the projects that use the GPU machines) and the patch
# this repository's GPU benchmarks apply to it; the features the patch brings, which a driver that absorbed it has.
REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
GPU_DRIVER_PATCH = REPO / "scripts" / "gpu_driver_lanes.diff"
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
    parsed = overhead_pairs.self_cost(line)
    assert parsed["engine_core.gc_callbacks"] == 12 and parsed["engine_core.imports_watched"] == 345
    assert parsed["engine_core.unwind_callbacks"] == 3066 and parsed["engine_core.unwind_switches"] == 20
    assert (parsed["engine_core.exports"], parsed["engine_core.exported_spans"]) == (41, 412)
    assert parsed["engine_core.exports_after_phase"] == 30
    assert 0 < parsed["engine_core.main_thread_waits"] <= self_cost.main_thread_switches()  # it slept above
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


def _log(lines: list[tuple[str, float, str]]) -> str:
    """vLLM log lines at seconds after 2026-11-26 10:00:00 UTC: (process, seconds, message)."""
    out = []
    for proc, t, msg in lines:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1795687200 + int(t)))
        pid = 5 if proc == "MainProcess" else 6
        out.append(f"INFO {stamp}.{round((t % 1) * 1000):03d} [{proc} pid={pid}] [x.py:1] {msg}")
    return "\n".join(out) + "\n"


def test_intervals_name_the_stretch_between_two_vllm_lines_where_an_arm_spends_its_extra_time():
    spawn_ns = 1795687200 * 10**9
    rows = []
    for pair in (1, 2, 3):
        for arm, capture in (("plain", 4.0), ("instr", 4.7)):  # the arm's capture is 0.7 s longer, nothing else
            log = _log([("MainProcess", 1.0, "vLLM API server version 0.26.0"),
                        ("EngineCore", 3.0, "Initializing a V1 LLM engine (v0.26.0)"),
                        ("EngineCore", 5.0, "Skipping CuTeDSL warmup"),
                        ("EngineCore", 5.0 + capture, f"Graph capturing finished in {capture:.0f} secs")])
            rows.append({"arm": arm, "pair": pair, "ready_s": 6.0 + capture + pair / 10, "spawn_ns": spawn_ns,
                         "log": log + _log([("MainProcess", 30.0, "after ready: not the start's")])})
    worst = overhead_pairs.intervals(rows, "instr")
    assert worst[0]["extra_s"] == 0.7 and worst[0]["longer_in"] == 3 and worst[0]["pairs"] == 3
    assert worst[0]["from"].startswith("EngineCore x.py:1 Skipping CuTeDSL warmup")
    assert worst[0]["to"].startswith("EngineCore x.py:1 Graph capturing finished in # secs")
    assert all(r["extra_s"] == 0 for r in worst[1:])
    assert not any("after ready" in r["to"] for r in worst)  # lines after the first /health 200 are not the start


def test_thread_stats_read_each_process_kinds_main_thread_from_the_drivers_snapshot():
    snap = {"at_ready": [
        {"pid": 10, "comm": "python3", "cmd": "python3 /tmp/vx/bin/vllm serve /tmp/vx/model --port 8100",
         "threads": [{"tid": 10, "comm": "python3", "cpu_s": 20.0, "vcsw": 100, "ivcsw": 5},
                     {"tid": 11, "comm": "python3", "cpu_s": 1.5, "vcsw": 9, "ivcsw": 1}]},
        {"pid": 12, "comm": "VLLM::EngineCor", "cmd": "VLLM::EngineCore",
         "threads": [{"tid": 12, "comm": "VLLM::EngineCor", "cpu_s": 31.5, "vcsw": 217, "ivcsw": 85},
                     {"tid": 13, "comm": "python3", "cpu_s": 0.25, "vcsw": 3, "ivcsw": 0}]},
        {"pid": 14, "comm": "py-spy", "cmd": "py-spy record -- vllm serve x", "threads": []},
    ]}
    s = overhead_pairs.thread_stats(snap)
    assert s["proc.api_server.main_cpu_s"] == 20.0 and s["proc.api_server.process_cpu_s"] == 21.5
    assert s["proc.engine_core.main_cpu_s"] == 31.5 and s["proc.engine_core.main_vcsw"] == 217
    assert s["proc.engine_core.threads"] == 2 and not any("py" in k for k in s)


def test_thread_stats_carry_the_schedulers_migrations_numa_counters_and_the_hosts_vmstat_deltas():
    snap = {"at_ready": [{"pid": 12, "comm": "VLLM::EngineCor", "cmd": "VLLM::EngineCore", "threads": [
        {"tid": 12, "comm": "VLLM::EngineCor", "cpu_s": 31.5, "user_s": 29.5, "sys_s": 2.0, "minflt": 500_000,
         "vcsw": 217, "ivcsw": 85, "last_cpu": 3, "migrations": 4_000, "numa_faults": 120, "numa_pages_migrated": 7}]}],
        "vmstat_delta": {"numa_hint_faults": 9_000, "pgfault": 2_000_000}}
    s = overhead_pairs.thread_stats(snap)
    assert s["proc.engine_core.main_migrations"] == 4_000 and s["proc.engine_core.main_numa_faults"] == 120
    assert s["proc.engine_core.main_numa_pages_migrated"] == 7 and s["proc.engine_core.main_minflt"] == 500_000
    assert s["host.numa_hint_faults"] == 9_000 and s["host.pgfault"] == 2_000_000


def test_profile_diff_reads_a_processes_threads_and_main_thread_functions_from_py_spy_raw_output(tmp_path):
    import profile_diff

    raw = tmp_path / "profile.txt"
    raw.write_text(
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (2): MainThread;run (core.py:10);capture (runner.py:20) 300\n"
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (2): MainThread;run (core.py:11);load (backends.py:5) 100\n"
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (3): vllm-otel-startup-sampler;_run (sampler.py:1) 50\n"
        'process 1:"vllm serve";thread (1): MainThread;serve (api.py:1) 999\n'
        'process 1:"vllm serve";thread (1): MainThread;<module> (vllm:5);wrapper (vllm_otel_startup/x/wrappers.py:1);'
        "main (main.py:95);_find_and_load (<frozen importlib._bootstrap>:1) 7\n")
    threads, inclusive, own, ours = profile_diff.load(raw, "spawn_main")
    assert threads == {"MainThread": 400, "vllm-otel-startup-sampler": 50}  # the API server's samples are not its
    assert inclusive["run (core.py)"] == 400 and own["capture (runner.py)"] == 300 and own["load (backends.py)"] == 100
    assert not ours
    # the launched process (py-spy may read its title as ""), and the wrapper of ours under vLLM's call in it
    threads, inclusive, own, ours = profile_diff.load(raw, profile_diff.LAUNCH)
    assert threads == {"MainThread": 1006, "MainThread, a frame of ours on its stack": 7}
    assert ours == {"wrapper (vllm_otel_startup/x/wrappers.py)": 7}


def test_full_collections_are_counted_per_process_from_the_gc_counter_lines_of_both_arms():
    log = _log([("MainProcess", 1.0, "vLLM API server version 0.26.0"), ("EngineCore", 3.0, "Initializing")]) + (
        "vos-gc pid=5 wall=1.0 dur=0.2000 n=100,10,1 collected=3 argv=/tmp/vx/bin/vllm\n"
        "vos-gc pid=6 wall=2.0 dur=0.4000 n=90,9,1 collected=0 argv=-c\n"
        "vos-gc pid=6 wall=3.0 dur=0.4500 n=190,19,2 collected=0 argv=-c\n"
        "vos-gc pid=9 wall=3.0 dur=0.0010 n=5,0,1 collected=0 argv=-c\n")  # the resource tracker: no vLLM line
    assert overhead_pairs.full_gcs(log) == {
        "full_gc.launcher": 1, "full_gc_s.launcher": 0.2, "full_gc.EngineCore": 2, "full_gc_s.EngineCore": 0.85,
        "full_gc.other": 1, "full_gc_s.other": 0.001}
    assert overhead_pairs.full_gcs(log.replace("vos-gc", "other")) == {}


def test_import_times_are_split_per_interpreter_with_the_launcher_and_the_resource_tracker_set_aside():
    import import_diff

    head = import_diff.HEADER + "\n"

    def line(us: int, mod: str) -> str:
        return f"import time: {us:>9} | {us:>10} | {mod}\n"

    log = (head + line(100, "opentelemetry.instrumentation") +  # opentelemetry-instrument, before it execs vllm
           head + line(5000, "torch") + line(300, "vllm") + "INFO 12:00:00 vLLM API server\n" +
           head + line(50, "multiprocessing.resource_tracker") +
           head + line(7000, "torch") + line(400, "vllm") + line(20, "late_api_import") +
           line(900, "vllm.v1.engine.core") + line(30, "late_api_import"))  # seen twice: the second is the API's
    segs = import_diff.import_segments(log)
    assert [sorted(s) for s in segs[2:]] == [["multiprocessing.resource_tracker"],
                                             ["late_api_import", "torch", "vllm", "vllm.v1.engine.core"]]
    assert segs[1]["late_api_import"] == 30  # given to the busiest earlier interpreter without it
    api, core = import_diff.main_two(segs)
    assert api == {"torch": 5000, "vllm": 300, "late_api_import": 30} and core["vllm.v1.engine.core"] == 900


def test_the_engine_cores_main_thread_cpu_is_read_between_two_lines_from_the_drivers_timeline():
    def timeline(rate: float) -> list[dict]:  # the EngineCore's main thread using `rate` cores from 2 s on
        return [{"t": t / 2, "procs": [{"pid": 6, "comm": "VLLM::EngineCor" if t >= 4 else "python3",
                                        "cpu_s": max(0.0, (t / 2 - 2) * rate)}]} for t in range(0, 31)]

    tl = timeline(1.0)
    assert overhead_pairs.main_cpu_at(tl, "engine_core", 1.0) == 0.0  # before it shows its title
    assert overhead_pairs.main_cpu_at(tl, "engine_core", 7.25) == 5.25
    assert overhead_pairs.main_cpu_at(tl, "engine_core", 99.0) is None  # outside the timeline
    spawn_ns = 1795687200 * 10**9
    rows = []
    for pair in (1, 2):
        for arm, rate in (("plain", 0.5), ("instr", 1.0)):
            rows.append({"arm": arm, "pair": pair, "ready_s": 12.0, "spawn_ns": spawn_ns, "threads": {
                "timeline": timeline(rate)}, "log": _log([("EngineCore", 5.0, "Skipping CuTeDSL warmup"),
                                                          ("EngineCore", 9.0, "Graph capturing finished")])})
    capture = next(r for r in overhead_pairs.intervals(rows, "instr") if r["to"].startswith("EngineCore x.py:1 Graph"))
    assert capture["extra_s"] == 0 and capture["engine_core_main_cpu_extra_s"] == 2.0  # 4 s at 1 core against 0.5


def test_each_process_main_thread_is_read_at_its_first_log_line_from_the_drivers_timeline():
    """The launched process keeps the interpreter's name; its main thread's faults at its first line are the
    bisect measure for its interpreter start and imports (issue 25: +65,000 with the agent, to 0.3 % in each arm).
    The EngineCore is timed from its estimated start (first seen, less the CPU it had used); ``waiting_s`` (seconds -
    CPU) tells a CPU-bound import phase from one kept off the CPU (the GIL, the disk), with its voluntary switches."""
    snap = {"at_ready": [
        {"pid": 10, "comm": "python3", "cmd": "python3 /tmp/vx/bin/vllm serve /tmp/vx/model --port 8100",
         "threads": []},
        {"pid": 12, "comm": "VLLM::EngineCor", "cmd": "VLLM::EngineCore", "threads": []}],
        "timeline": [{"t": t / 2, "procs": [
            {"pid": 10, "tid": 10, "comm": "python3", "cpu_s": t / 2, "minflt": 1000 * t, "vcsw": t},
            *([{"pid": 12, "tid": 12, "comm": "python3" if t < 30 else "VLLM::EngineCor", "cpu_s": 0.5 + (t - 20) / 4,
                "minflt": 100 * t, "vcsw": 3 * t}] if t >= 20 else [])]} for t in range(0, 41)]}
    assert overhead_pairs.at_first_line(snap, "api_server", 10.25) == {
        "api_first_line_s": 10.25, "api_main_cpu_s": 10.25, "api_main_minflt": 20_500, "api_main_vcsw": 20,
        "api_waiting_s": 0.0}
    # first seen at 10 s (before its title) with 0.5 s of CPU used: started at 9.5 s; then a core half the time
    assert overhead_pairs.at_first_line(snap, "engine_core", 16.0) == {
        "ec_first_line_s": 6.5, "ec_main_cpu_s": 3.5, "ec_main_minflt": 3_200, "ec_main_vcsw": 96,
        "ec_waiting_s": 3.0}
    assert overhead_pairs.at_first_line(snap, "api_server", 99.0) == {}  # outside the timeline
    assert overhead_pairs.at_first_line(snap, "api_server", None) == {}  # no first line
    assert overhead_pairs.at_first_line({"at_ready": snap["at_ready"][1:], "timeline": snap["timeline"]},
                                        "api_server", 5) == {}


def test_a_gpu_queue_runs_its_tail_arms_in_turn_so_a_call_cut_short_still_compares_every_arm():
    q = overhead_pairs.gpu_queue(1, {}, lanes=2, tail={"a": {"X": "1"}, "b": {"Y": "1"}}, tail_pairs=2)
    arms = [e["arm"] for e in q[1:] if e["arm"] != "plain"]
    assert arms == ["instr", "a", "b", "a", "b"]
    assert all(e["gpu"] in (0, 1) for e in q) and {e["pair"] for e in q[1:]} == {1, 2, 3, 4, 5}
    for arm in ("a", "b"):  # each arm on both GPUs and in both places of its pair (a GPU's bias cannot pile up)
        runs = [e for e in q[1:] if e["arm"] == arm]
        assert {e["gpu"] for e in runs} == {0, 1}
        assert {[x["arm"] for x in q[1:] if x["pair"] == e["pair"]].index(arm) for e in runs} == {0, 1}
    assert next(e for e in q[1:] if e["arm"] == "a")["env"]["X"] == "1"


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


def test_one_start_per_arm_is_read_by_the_engine_cores_page_faults_at_ready_and_inside_capture():
    """gpu-queue --once: one plain start and one of each arm (pair 1); the per-start table reads the EngineCore main
    thread's minor faults at ready and between the two capture lines (the driver's 2 Hz timeline)."""
    q = overhead_pairs.gpu_queue(8, {}, once={"skeleton": {"X": "1"}, "boot": {"Y": "1"}})
    assert [e["name"] for e in q] == ["cold_otlp", "pair1_plain", "pair1_skeleton", "pair1_boot"]
    assert not q[1]["instr"] and q[2]["instr"] and q[2]["env"]["X"] == "1"

    def timeline(per_s: int) -> list[dict]:  # minor faults of the EngineCore's main thread: per_s a second from 2 s
        return [{"t": t / 2, "procs": [{"pid": 6, "comm": "VLLM::EngineCor", "minflt": max(0, int((t / 2 - 2) * per_s)),
                                        "user_s": t / 4, "cpu_s": t / 4}]} for t in range(0, 31)]

    spawn_ns = 1795687200 * 10**9
    rows = []
    for arm, per_s in (("plain", 1000), ("skeleton", 1500)):
        main = {"tid": 6, "comm": "VLLM::EngineCor", "minflt": per_s * 10, "user_s": 30.0}
        rows.append({"arm": arm, "pair": 1, "ready_s": 12.0, "spawn_ns": spawn_ns, "threads": {
            "timeline": timeline(per_s), "at_ready": [{"pid": 6, "comm": "VLLM::EngineCor", "cmd": "x",
                                                       "threads": [main]}]},
                     "log": _log([("EngineCore", 5.0, "Skipping CuTeDSL warmup"),
                                  ("EngineCore", 9.0, "Graph capturing finished in 4 secs")])})
    by = {r["arm"]: r for r in overhead_pairs.per_start(rows)}
    assert by["plain"]["ec_main_minflt"] == 10_000 and by["skeleton"]["ec_main_minflt"] == 15_000
    assert by["plain"]["capture_s"] == 4.0 and by["plain"]["capture_minflt"] == 4_000
    assert by["skeleton"]["capture_minflt"] == 6_000 and by["skeleton"]["capture_user_s"] == 2.0


def test_the_api_server_first_line_bench_reads_its_arms_and_compares_each_with_plain():
    """scripts/api_first_line.py (no GPU: vLLM's CUDA wheel up to the API server's first line): ``plain`` and any arm
    named ``plain...`` run without opentelemetry-instrument, every other arm with it; each with its environment; the
    table gives each arm's medians against plain."""
    import api_first_line

    arms = api_first_line.parse_arms(["plain", "instr", "nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers;A=1",
                                      "plainsrc=PYTHONDONTWRITEBYTECODE=1"])
    assert arms == {"plain": None, "instr": {}, "nowatch": {"OTEL_PYTHON_VLLM_STARTUP_OFF": "watchers", "A": "1"},
                    "plainsrc": {"PYTHONDONTWRITEBYTECODE": "1"}}
    assert [api_first_line.instrumented(a) for a in arms] == [False, True, True, False]
    env = api_first_line._env(Path("/v"), "plainsrc", arms["plainsrc"], "/w")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and "OTEL_PYTHON_VLLM_STARTUP_DIR" not in env
    env = api_first_line._env(Path("/v"), "nowatch", arms["nowatch"], "/w")
    assert env["OTEL_PYTHON_VLLM_STARTUP_OFF"] == "watchers" and env["OTEL_PYTHON_VLLM_STARTUP_DIR"] == "/w"
    rows = [{"arm": "plain", "user_s": 5.8, "sys_s": 0.8, "faults": 170_100, "vcsw": 90},
            {"arm": "plain", "user_s": 5.9, "sys_s": 0.8, "faults": 170_300, "vcsw": 110},
            {"arm": "instr", "user_s": 6.0, "sys_s": 0.9, "faults": 177_100, "vcsw": 900},
            {"arm": "instr", "chunk_maps": 28_099, "wall_s": 9.0}]
    table = api_first_line.summary(rows, ["plain", "instr"]).splitlines()
    assert table[1].split()[:8] == ["plain", "2", "6.65", "+0.00", "170200", "+0", "200", "100"]
    assert table[2].split() == ["instr", "1", "6.90", "+0.25", "177100", "+6900", "0", "900", "28099"]


def test_the_child_form_starts_an_interpreter_as_a_spawned_engine_core_of_an_instrumented_server():
    """``api_first_line.py child``: every arm's interpreter says it is a spawned EngineCore (multiprocessing's flag on
    its command line, the kind in its environment); only instrumented arms get OpenTelemetry's sitecustomize first on
    PYTHONPATH and our distro named, as a child of ``opentelemetry-instrument`` inherits them."""
    import api_first_line

    arms = api_first_line.parse_arms(["plain", "instr", "nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers"])
    plain = api_first_line.child_env(Path("/v"), "plain", arms["plain"], "/w", "/site/auto")
    instr = api_first_line.child_env(Path("/v"), "instr", arms["instr"], "/w", "/site/auto")
    nowatch = api_first_line.child_env(Path("/v"), "nowatch", arms["nowatch"], "/w", "/site/auto")
    assert plain["OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND"] == instr["OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND"] == "engine_core"
    assert "/site/auto" not in plain.get("PYTHONPATH", "") and "OTEL_PYTHON_DISTRO" not in plain
    assert instr["PYTHONPATH"].split(":")[0] == "/site/auto" and instr["OTEL_PYTHON_DISTRO"] == "vllm_startup"
    assert nowatch["OTEL_PYTHON_VLLM_STARTUP_OFF"] == "watchers" and nowatch["PYTHONPATH"].startswith("/site/auto")


def test_more_pairs_continue_a_queue_without_a_cold_start_in_the_order_one_long_queue_has():
    """gpu-queue --first-pair 9 --pairs 3: the three pairs a machine that ran pairs 1-8 can still fit (issue 25's
    eleven pairs), numbered on, each pair's order flipped as in one queue of eleven."""
    long = overhead_pairs.gpu_queue(11, {})
    more = overhead_pairs.gpu_queue(3, {}, first_pair=9)
    assert [e["name"] for e in more] == ["pair9_plain", "pair9_instr", "pair10_instr", "pair10_plain",
                                         "pair11_plain", "pair11_instr"]
    assert more == long[-6:]
    assert overhead_pairs.gpu_queue(2, {})[0]["name"] == "cold_otlp"


def test_a_variant_names_its_variables_and_only_an_env_arm_may_add_none():
    """``env…`` arms run without the launcher (OpenTelemetry's sitecustomize on PYTHONPATH): nothing more to name."""
    assert overhead_pairs.parse_variants(["nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes", "env="]) == {
        "nowatch": {"OTEL_PYTHON_VLLM_STARTUP_OFF": "watchers,probes"}, "env": {}}
    with pytest.raises(SystemExit):
        overhead_pairs.parse_variants(["nowatch="])


def test_an_env_arm_on_the_gpu_runs_without_the_launcher_with_the_sitecustomize_first_on_the_drivers_path():
    q = overhead_pairs.gpu_queue(1, {"env": {}, "otelonly": {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}})
    by_arm = {e["arm"]: e for e in q if e.get("arm")}
    env = by_arm["env"]
    assert env["instr"] and env["launcher"] is False and env["export"] == "otlp"
    assert env["env"]["PYTHONPATH"].split(":")[0] == "@R/site-otel/opentelemetry/instrumentation/auto_instrumentation"
    assert env["env"]["OTEL_PYTHON_DISTRO"] == env["env"]["OTEL_PYTHON_CONFIGURATOR"] == "vllm_startup"
    for arm in ("instr", "otelonly", "plain"):  # the others as before: the launcher where instrumented
        assert "launcher" not in by_arm[arm] and "PYTHONPATH" not in by_arm[arm]["env"]


def test_the_report_sets_the_agent_against_each_variant_pair_by_pair():
    """With a third arm (OpenTelemetry alone), what is ours is the agent over that arm in the same pair."""
    ready = {1: (30.0, 31.2, 31.0), 2: (31.0, 31.9, 32.2), 3: (29.0, 30.3, 30.0)}
    rows = [dict(arm=arm, pair=p, ready_s=t, log="", spawn_ns=0)
            for p, ts in ready.items() for arm, t in zip(("plain", "instr", "otelonly"), ts, strict=True)]
    out = overhead_pairs.report(rows)
    assert out["arms"]["instr"]["ratios"] == [1.04, 1.029, 1.0448]
    assert out["arms"]["otelonly"]["ratios"] == [1.0333, 1.0387, 1.0345]
    assert out["against_instr"]["otelonly"]["ratios"] == [1.0065, 0.9907, 1.01]
    assert out["against_instr"]["otelonly"]["slower_in"] == 2
