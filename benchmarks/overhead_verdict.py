"""The overhead benchmark's verdict (issue 58 item 4): one table, each arm against plain and the agent against each
variant, paired by round (median ratio, a bootstrap 95 % interval of it, slower in N of M rounds, the sign test),
and whether it resolves the goal; then the counters that resolve what the wall clock cannot, per arm (medians over
its rounds): each process kind's main-thread waits (voluntary context switches) at ready and to its first log line,
involuntary switches, the main thread's CPU, and our threads' CPU."""

from __future__ import annotations

import statistics

from benchmarks.pairs import square_period
from benchmarks.stats import summary
from benchmarks.threads import thread_stats

GOAL = 1.01  # the agent's cost on a whole start, as a ratio to plain
RESOLVED, NOT_RESOLVED, SLOWER = f"resolved <= {GOAL}", "not resolved", "slower"

# (label, key): a key of threads.thread_stats (at the first /health 200) or of threads.per_start (to a first line)
COUNTERS = (
    ("API server waits at ready", "proc.api_server.main_vcsw"),
    ("API server waits to first line", "api_main_vcsw"),
    ("API server preempted at ready", "proc.api_server.main_ivcsw"),
    ("API server main CPU s at ready", "proc.api_server.main_cpu_s"),
    ("EngineCore waits at ready", "proc.engine_core.main_vcsw"),
    ("EngineCore waits to first line", "ec_main_vcsw"),
    ("EngineCore preempted at ready", "proc.engine_core.main_ivcsw"),
    ("EngineCore main CPU s at ready", "proc.engine_core.main_cpu_s"),
    ("worker waits at ready", "proc.worker.main_vcsw"),
    ("worker waits to first line", "wk_main_vcsw"),
    ("worker main CPU s at ready", "proc.worker.main_cpu_s"),
    ("our threads' CPU s (all)", "ours_cpu_s"),
    ("our threads (all)", "ours_threads"),
)


def verdict_of(low: float, high: float, goal: float = GOAL) -> str:
    """Resolved at or under ``goal`` when the interval's upper end is; slower when even its lower end is above it;
    otherwise this many rounds do not tell."""
    if high <= goal:
        return RESOLVED
    return SLOWER if low > goal else NOT_RESOLVED


def verdict(rows: list[dict], arms: list[str], goal: float = GOAL) -> list[dict]:
    """One row per comparison: each arm against plain, then the agent (``instr``) against each variant; ratios of
    the two arms' time to ready in the same round."""
    by = {(r["pair"], r["arm"]): r["ready_s"] for r in rows if r.get("ready_s")}
    rounds = sorted({p for p, _ in by})
    out = []
    against = [(arm, "plain") for arm in arms if arm != "plain"]
    against += [("instr", arm) for arm in arms if "instr" in arms and arm not in ("plain", "instr")]
    for arm, base in against:
        ratios = [by[p, arm] / by[p, base] for p in rounds if (p, arm) in by and (p, base) in by]
        if not ratios:
            continue
        s = summary(ratios)
        out.append({"arm": arm, "against": base, "rounds": s["pairs"], "median": round(s["median"], 4),
                    "ci95_low": round(s["ci95_low"], 4), "ci95_high": round(s["ci95_high"], 4),
                    "slower_in": s["slower_in"], "sign_p": round(s["sign_p"], 4),
                    "verdict": verdict_of(s["ci95_low"], s["ci95_high"], goal)})
    return out


def counters(rows: list[dict], starts: list[dict], arms: list[str]) -> dict[str, dict[str, float]]:
    """Per arm, the median over its started rounds of each counter in COUNTERS that some start has (``starts``:
    threads.per_start of the same rows)."""
    first = {(x["pair"], x["arm"]): x for x in starts}
    values: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
    for r in rows:
        if not r.get("ready_s") or r["arm"] not in values:
            continue
        at_ready = thread_stats(r.get("threads") or {})
        named = sum(v for k, v in at_ready.items() if k.endswith(".ours_threads"))
        for kind in ("ours_cpu_s", "ours_threads") if named else ():  # summed over the process kinds, where /proc
            at_ready[kind] = sum(v for k, v in at_ready.items() if k.endswith(f".{kind}"))  # names any of ours
        got = {**at_ready, **first.get((r["pair"], r["arm"]), {})}
        for _, key in COUNTERS:
            if got.get(key) is not None:
                values[r["arm"]].setdefault(key, []).append(float(got[key]))
    return {arm: {k: statistics.median(v) for k, v in keys.items()} for arm, keys in values.items()}


def print_verdict(table: list[dict], per_arm: dict[str, dict[str, float]], arms: list[str], goal: float = GOAL) -> None:
    """The verdict table, then the counters per arm."""
    print(f"\nverdict (goal: the median ratio of the time to ready <= {goal}, resolved when the upper end of its "
          "bootstrap 95 % interval, paired by round, is too; slower: when its lower end is above it)")
    print(f"  {'arm':<24} {'rounds':>6} {'median':>7} {'95 % interval':>15} {'slower in':>11} {'sign p':>7}  verdict")
    for v in table:
        print(f"  {v['arm'] + ' / ' + v['against']:<24} {v['rounds']:>6} {v['median']:7.4f} "
              f"{v['ci95_low']:7.4f}-{v['ci95_high']:<7.4f} {v['slower_in']:>4} of {v['rounds']:<3} "
              f"{v['sign_p']:7.3f}  {v['verdict']}")
    k, n = len(arms), max((v["rounds"] for v in table), default=0)
    if n and n % square_period(k):
        print(f"  ({n} rounds of {k} arms: not a whole number of Latin squares of {square_period(k)} rounds; each arm "
              "took the positions unequally often)")
    shown = [(label, key) for label, key in COUNTERS if any(key in per_arm.get(a, {}) for a in arms)]
    if not shown:
        return
    print("\ncounters per arm (medians over rounds; waits: the main thread's voluntary context switches; preempted: "
          "its involuntary ones; our threads: where /proc names them, CPython >= 3.14 or a name the agent sets)")
    print(f"  {'':<32}" + "".join(f" {a:>12}" for a in arms))
    for label, key in shown:
        cells = [per_arm.get(a, {}).get(key) for a in arms]
        print(f"  {label:<32}" + "".join(f" {'-':>12}" if c is None else f" {c:12.2f}" if c % 1 else f" {c:12.0f}"
                                         for c in cells))
