"""The overhead benchmark's printout and its JSON: each arm against plain pair by pair (and the agent against each
variant), the medians per arm of every figure read from a start, where the extra time sits between vLLM's log
lines, the per-start tables of the main threads (with the patched GPU driver's threads.json, or the CPU form's), and
the verdict table with the counters per arm (overhead_verdict.py)."""

from __future__ import annotations

import math
import statistics

from benchmarks.overhead_verdict import counters, print_verdict, verdict
from benchmarks.stats import summary
from benchmarks.threads import intervals, per_start, thread_stats, titled
from benchmarks.vllm_log import figures, first_lines, full_gcs, self_cost


def report(rows: list[dict]) -> dict:
    """rows: one per start: arm, pair, ready_s, log, spawn_ns (threads: a threads.json snapshot). Prints the pair
    table, the medians per arm, and last the verdict table and the counters per arm (``verdict``, ``counters``)."""
    rows = [titled(r) for r in rows]  # every arm's vLLM processes by kind, titled or not
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (a != "plain", a != "instr", a))
    out: dict = pair_ratios(rows, arms)
    out["medians"] = per_arm = medians(rows, arms)
    out["intervals"] = {arm: print_intervals(rows, arm) for arm in arms[1:]}
    out["per_start"] = starts = per_start(rows)
    print_per_start(starts, arms)
    print_medians(per_arm, arms)
    out["verdict"] = table = verdict(rows, arms)
    out["counters"] = per_arm_counters = counters(rows, starts, arms)
    print_verdict(table, per_arm_counters, arms)
    return out


def pair_ratios(rows: list[dict], arms: list[str]) -> dict:
    """Each arm against plain, the agent against each variant too (e.g. OpenTelemetry alone: what is ours), pair by
    pair: the ``arms`` and ``against_instr`` sections."""
    by = {(r["pair"], r["arm"]): r for r in rows if r.get("ready_s")}
    pairs = sorted({p for p, _ in by})
    out: dict = {"arms": {}, "against_instr": {}}
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
    return out


def medians(rows: list[dict], arms: list[str]) -> dict[str, dict[str, float]]:
    """Per arm, the median over its starts of every figure read from a start."""
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
    return per_arm


def print_intervals(rows: list[dict], arm: str) -> list[dict]:
    """Where an arm's extra time is, between two of vLLM's log lines (printed; returned)."""
    worst = intervals(rows, arm)
    if worst:
        print(f"\n{arm}: where the extra time is, between two of vLLM's log lines (median over "
              f"{worst[0]['pairs']} pairs of {arm} - plain)")
    for r in worst:
        cpu = r.get("engine_core_main_cpu_extra_s")
        print(f"  {r['extra_s']:+6.2f} s (plain {r['plain_s']:5.2f} s, longer in {r['longer_in']}/{r['pairs']}"
              + (f"; EngineCore main thread CPU {cpu:+.2f} s" if cpu is not None else "") + ")  "
              f"{r['from'][:60]}\n{'':34}-> {r['to'][:60]}")
    return worst


def print_per_start(starts: list[dict], arms: list[str]) -> None:
    """The per-start tables: the EngineCore main thread at ready and in CUDA-graph capture, then each main thread up
    to its process's first log line (where threads.json has them)."""
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


def print_medians(per_arm: dict[str, dict[str, float]], arms: list[str]) -> None:
    """The table of every figure's median per arm, and the agent's difference from plain."""
    names = sorted({k for m in per_arm.values() for k in m}, key=lambda k: (k.count("."), k))
    print("\nmedian per start" + "".join(f" | {a:>14}" for a in arms) + (" | instr-plain" if "instr" in arms else ""))
    for k in names:
        vals = [per_arm[a].get(k) for a in arms]
        delta = (per_arm["instr"].get(k, math.nan) - per_arm["plain"].get(k, math.nan)) if "instr" in arms else None
        print(f"  {k:<40}" + "".join(f" | {v:14.3f}" if v is not None else f" | {'-':>14}" for v in vals)
              + (f" | {delta:+10.3f}" if delta is not None and not math.isnan(delta) else ""))
