"""What the patched GPU driver's threads.json says about a start's processes (gpu/driver_lanes.diff: per thread of
each process at the first /health 200, and a 2 Hz /proc timeline of the main threads), read against vLLM's own log
lines: per start, per process kind, and per interval between two log lines."""

from __future__ import annotations

import statistics

from benchmarks.vllm_log import STAMP, _stamp_process, figures, first_lines, line_times


def kind_of(comm: str) -> str | None:
    """The vLLM process a /proc name (its title, cut to 15 characters) belongs to."""
    if comm.startswith("VLLM::EngineCor"):
        return "engine_core"
    return "worker" if comm.startswith("VLLM::Worker") else None


def main_cpu_at(timeline: list[dict], kind: str, t: float) -> float | None:
    """CPU seconds of the ``kind`` process's main thread ``t`` seconds after the launch, interpolated in the patched
    driver's 2 Hz /proc timeline (threads.json); None outside it. Before the process shows its title: 0."""
    return main_at(timeline, kind, t, "cpu_s")


def proc_kind(proc: dict) -> str | None:
    """A process of the driver's snapshot: its vLLM title's kind, or ``api_server`` for the launched ``vllm serve``
    (it keeps the interpreter's name), never py-spy's."""
    cmd = proc["cmd"]
    if cmd.startswith("VLLM::APIServer"):  # a release that titles its API server too
        return "api_server"
    return kind_of(proc["comm"]) or ("api_server" if " serve " in cmd and "py-spy" not in cmd else None)


TITLES = {"EngineCore": "VLLM::EngineCor", "Worker": "VLLM::Worker", "VllmWorker": "VLLM::Worker"}  # as in /proc


def titled(row: dict) -> dict:
    """``row`` with its snapshot's untitled vLLM processes named from its log: a process whose pid vLLM's log lines
    give as an EngineCore or a worker gets that /proc title (under opentelemetry-instrument without our agent, whose
    agent/patching/proctitle.py repairs it, setproctitle fails and they stay ``python``), so every arm's processes
    are found by kind."""
    snap = row.get("threads") or {}
    if not snap:
        return row
    names = {int(m.group(6)): _stamp_process(m) for m in STAMP.finditer(row.get("log") or "")}
    title = {pid: TITLES[n] for pid, n in names.items() if n in TITLES}

    def fix(proc: dict) -> dict:
        new = title.get(proc["pid"])
        return {**proc, "comm": new} if new and kind_of(proc["comm"]) is None else proc

    out = {**snap, "at_ready": [fix(pr) for pr in snap.get("at_ready", [])]}
    if "timeline" in snap:
        out["timeline"] = [{**e, "procs": [fix(pr) for pr in e["procs"]]} for e in snap["timeline"]]
    return {**row, "threads": out}


# our threads as /proc shows them: the agent names each at the OS level, ``vos-`` and its part (agent/foundation/
# threads.py: vos-sampler, vos-metrics, vos-live ...); before it did, only CPython >= 3.14 gave /proc a thread's Python
# name, cut to 15 characters (``vllm-otel-start``)
OURS_COMM = ("vos-", "vllm-otel-start")


def main_at(timeline: list[dict], kind: str, t: float, key: str) -> float | None:
    """A /proc counter (``minflt``, ``user_s`` ...) of the ``kind`` process's main thread ``t`` seconds after the
    launch, interpolated in the 2 Hz timeline; None outside it."""
    return _at([(e["t"], sum(pr.get(key, 0) for pr in e["procs"] if kind_of(pr["comm"]) == kind)) for e in timeline], t)


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
            if kind_of(proc["comm"]) == "engine_core":
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
        # the API server's first line: ``APIServer`` where vLLM names it so (0.26), its ``MainProcess`` (0.32)
        row.update(at_first_line(snap, "api_server", lines.get("APIServer", lines.get("launcher"))))
        row.update(at_first_line(snap, "engine_core", lines.get("EngineCore")))
        row.update(at_first_line(snap, "worker", lines.get("Worker") or lines.get("VllmWorker")))
        out.append(row)
    return out


PREFIXES = {"api_server": "api", "engine_core": "ec", "worker": "wk"}  # at_first_line's keys per process kind


def at_first_line(snap: dict, kind: str, first_line_s: float | None) -> dict[str, float]:
    """A process's main thread from its start to its first log line (its interpreter start and imports, on the
    critical path), interpolated in the driver's 2 Hz timeline: seconds, CPU seconds, minor page faults, voluntary
    context switches (the counters run from the process's creation) and the seconds it was off the CPU
    (``waiting_s``: seconds - CPU; a CPU-bound import phase waits only for the GIL, the disk or the page cache).
    ``api_server`` is the launched process (it keeps the interpreter's name), timed from the launch; an
    ``engine_core`` from its start estimated as the first timeline point that shows its pid (up to 0.5 s after its
    spawn) less the CPU it had used by then (it runs on a CPU from its first instant: interpreter start), a worker
    alike (the first one). Keys are prefixed ``api_`` / ``ec_`` / ``wk_``."""
    pid = next((proc["pid"] for proc in snap.get("at_ready", []) if proc_kind(proc) == kind), None)
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
    pre = PREFIXES[kind]
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



def thread_stats(snapshot: dict) -> dict[str, float]:
    """threads.json (the patched driver, at the first /health 200): per process kind, the main thread's CPU seconds
    and context switches (voluntary: it blocked, on the GIL, a lock, the driver or I/O; involuntary: preempted), its
    page faults, CPU migrations and NUMA-balancing counters where the kernel has them, and the whole process's CPU;
    the host's /proc/vmstat deltas over the start (NUMA hinting faults, page migrations); the CPU seconds and count
    of our threads (named ``vllm-otel-startup-*``: OURS_COMM). The CPU form's snapshots (proc_threads.py) have the
    same shape."""
    out: dict[str, float] = {}
    for proc in snapshot.get("at_ready", []):
        kind = proc_kind(proc)
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
                       ("threads", len(proc["threads"])),
                       ("ours_cpu_s", sum(t["cpu_s"] for t in proc["threads"] if t["comm"].startswith(OURS_COMM))),
                       ("ours_threads", sum(t["comm"].startswith(OURS_COMM) for t in proc["threads"]))):
            out[f"proc.{kind}.{key}"] = out.get(f"proc.{kind}.{key}", 0.0) + float(v)
        for t in proc["threads"]:  # each thread of ours on its own: which part of the agent used the CPU
            if t["comm"].startswith(OURS_COMM):
                key = f"proc.{kind}.ours.{t['comm']}_cpu_s"
                out[key] = out.get(key, 0.0) + float(t["cpu_s"])
    for key, v in (snapshot.get("vmstat_delta") or {}).items():  # the host's, while this start ran (both lanes')
        out[f"host.{key}"] = float(v)
    return out
