"""The overhead benchmark's analysis of recorded starts: the pair statistics, vLLM's own log lines, the patched GPU
driver's thread snapshots and the report (``python -m benchmarks overhead rows|gpu``)."""

from __future__ import annotations

import time

from benchmarks import overhead_queue, overhead_report, stats, threads, vllm_log


def test_the_pair_statistics_match_the_issue_figures():
    """Issue 25's eleven H100 pairs: median 1.095, geometric mean 1.093, slower in 10 of 11 (sign test p = 0.012)."""
    s = stats.summary([1.011, 1.096, 0.940, 1.109, 1.318, 1.095, 1.139, 1.009, 1.020, 1.092, 1.252])
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
    f = vllm_log.figures(log)
    assert f == {"weights_load_s": 1.9, "init_engine_s": 13.25, "capture_full_it_s": 34.2}
    spawn_ns = int((1795687200 + 0.5) * 1e9)  # 2026-11-26 10:00:00.500 UTC
    first = vllm_log.first_lines(log, spawn_ns)
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
    worst = threads.intervals(rows, "instr")
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
    s = threads.thread_stats(snap)
    assert s["proc.api_server.main_cpu_s"] == 20.0 and s["proc.api_server.process_cpu_s"] == 21.5
    assert s["proc.engine_core.main_cpu_s"] == 31.5 and s["proc.engine_core.main_vcsw"] == 217
    assert s["proc.engine_core.threads"] == 2 and not any("py" in k for k in s)


def test_thread_stats_carry_the_schedulers_migrations_numa_counters_and_the_hosts_vmstat_deltas():
    snap = {"at_ready": [{"pid": 12, "comm": "VLLM::EngineCor", "cmd": "VLLM::EngineCore", "threads": [
        {"tid": 12, "comm": "VLLM::EngineCor", "cpu_s": 31.5, "user_s": 29.5, "sys_s": 2.0, "minflt": 500_000,
         "vcsw": 217, "ivcsw": 85, "last_cpu": 3, "migrations": 4_000, "numa_faults": 120, "numa_pages_migrated": 7}]}],
        "vmstat_delta": {"numa_hint_faults": 9_000, "pgfault": 2_000_000}}
    s = threads.thread_stats(snap)
    assert s["proc.engine_core.main_migrations"] == 4_000 and s["proc.engine_core.main_numa_faults"] == 120
    assert s["proc.engine_core.main_numa_pages_migrated"] == 7 and s["proc.engine_core.main_minflt"] == 500_000
    assert s["host.numa_hint_faults"] == 9_000 and s["host.pgfault"] == 2_000_000


def test_full_collections_are_counted_per_process_from_the_gc_counter_lines_of_both_arms():
    log = _log([("MainProcess", 1.0, "vLLM API server version 0.26.0"), ("EngineCore", 3.0, "Initializing")]) + (
        "vos-gc pid=5 wall=1.0 dur=0.2000 n=100,10,1 collected=3 argv=/tmp/vx/bin/vllm\n"
        "vos-gc pid=6 wall=2.0 dur=0.4000 n=90,9,1 collected=0 argv=-c\n"
        "vos-gc pid=6 wall=3.0 dur=0.4500 n=190,19,2 collected=0 argv=-c\n"
        "vos-gc pid=9 wall=3.0 dur=0.0010 n=5,0,1 collected=0 argv=-c\n")  # the resource tracker: no vLLM line
    assert vllm_log.full_gcs(log) == {
        "full_gc.launcher": 1, "full_gc_s.launcher": 0.2, "full_gc.EngineCore": 2, "full_gc_s.EngineCore": 0.85,
        "full_gc.other": 1, "full_gc_s.other": 0.001}
    assert vllm_log.full_gcs(log.replace("vos-gc", "other")) == {}


def test_the_engine_cores_main_thread_cpu_is_read_between_two_lines_from_the_drivers_timeline():
    def timeline(rate: float) -> list[dict]:  # the EngineCore's main thread using `rate` cores from 2 s on
        return [{"t": t / 2, "procs": [{"pid": 6, "comm": "VLLM::EngineCor" if t >= 4 else "python3",
                                        "cpu_s": max(0.0, (t / 2 - 2) * rate)}]} for t in range(0, 31)]

    tl = timeline(1.0)
    assert threads.main_cpu_at(tl, "engine_core", 1.0) == 0.0  # before it shows its title
    assert threads.main_cpu_at(tl, "engine_core", 7.25) == 5.25
    assert threads.main_cpu_at(tl, "engine_core", 99.0) is None  # outside the timeline
    spawn_ns = 1795687200 * 10**9
    rows = []
    for pair in (1, 2):
        for arm, rate in (("plain", 0.5), ("instr", 1.0)):
            rows.append({"arm": arm, "pair": pair, "ready_s": 12.0, "spawn_ns": spawn_ns, "threads": {
                "timeline": timeline(rate)}, "log": _log([("EngineCore", 5.0, "Skipping CuTeDSL warmup"),
                                                          ("EngineCore", 9.0, "Graph capturing finished")])})
    capture = next(r for r in threads.intervals(rows, "instr") if r["to"].startswith("EngineCore x.py:1 Graph"))
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
    assert threads.at_first_line(snap, "api_server", 10.25) == {
        "api_first_line_s": 10.25, "api_main_cpu_s": 10.25, "api_main_minflt": 20_500, "api_main_vcsw": 20,
        "api_waiting_s": 0.0}
    # first seen at 10 s (before its title) with 0.5 s of CPU used: started at 9.5 s; then a core half the time
    assert threads.at_first_line(snap, "engine_core", 16.0) == {
        "ec_first_line_s": 6.5, "ec_main_cpu_s": 3.5, "ec_main_minflt": 3_200, "ec_main_vcsw": 96,
        "ec_waiting_s": 3.0}
    assert threads.at_first_line(snap, "api_server", 99.0) == {}  # outside the timeline
    assert threads.at_first_line(snap, "api_server", None) == {}  # no first line
    assert threads.at_first_line({"at_ready": snap["at_ready"][1:], "timeline": snap["timeline"]},
                                        "api_server", 5) == {}


def test_the_report_sets_the_agent_against_each_variant_pair_by_pair():
    """With a third arm (OpenTelemetry alone), what is ours is the agent over that arm in the same pair."""
    ready = {1: (30.0, 31.2, 31.0), 2: (31.0, 31.9, 32.2), 3: (29.0, 30.3, 30.0)}
    rows = [dict(arm=arm, pair=p, ready_s=t, log="", spawn_ns=0)
            for p, ts in ready.items() for arm, t in zip(("plain", "instr", "otelonly"), ts, strict=True)]
    out = overhead_report.report(rows)
    assert out["arms"]["instr"]["ratios"] == [1.04, 1.029, 1.0448]
    assert out["arms"]["otelonly"]["ratios"] == [1.0333, 1.0387, 1.0345]
    assert out["against_instr"]["otelonly"]["ratios"] == [1.0065, 0.9907, 1.01]
    assert out["against_instr"]["otelonly"]["slower_in"] == 2


def test_one_start_per_arm_is_read_by_the_engine_cores_page_faults_at_ready_and_inside_capture():
    """gpu-queue --once: one plain start and one of each arm (pair 1); the per-start table reads the EngineCore main
    thread's minor faults at ready and between the two capture lines (the driver's 2 Hz timeline)."""
    q = overhead_queue.gpu_queue(8, {}, once={"skeleton": {"X": "1"}, "boot": {"Y": "1"}})
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
    by = {r["arm"]: r for r in threads.per_start(rows)}
    assert by["plain"]["ec_main_minflt"] == 10_000 and by["skeleton"]["ec_main_minflt"] == 15_000
    assert by["plain"]["capture_s"] == 4.0 and by["plain"]["capture_minflt"] == 4_000
    assert by["skeleton"]["capture_minflt"] == 6_000 and by["skeleton"]["capture_user_s"] == 2.0
