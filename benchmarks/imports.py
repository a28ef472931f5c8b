"""Each interpreter's imports, plain against instrumented, read from outside the agent (issue 25). Never asserted
in tests. (py-spy profiles of a queue's ``--profile`` pair: python -m benchmarks profiles.)

    python -m benchmarks imports RUNS_DIR [RUNS_DIR ...] [--top 15]
        the ``imports<N>_<arm>`` starts of ``overhead_pairs.py gpu-queue --imports N``: every interpreter's
        ``PYTHONPROFILEIMPORTTIME`` lines in serve.log, split per interpreter (each prints the header first; a module
        already seen in the newest interpreter is given to the earlier one with the most modules that lacks it, as
        two interpreters may import at once). Per process (the API server: the first interpreter that imports vllm;
        the EngineCore: the later one with the most modules, as the resource tracker starts between them) and arm:
        the imports' summed self time and module count, then the packages and modules whose self time differs most
        between the arms, and what only the instrumented arm imports.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

from benchmarks import command_parser
from benchmarks.pairs import queue_runs

HEADER = "import time: self [us] | cumulative | imported package"
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ?( *)(\S+)\s*$")
PROCESS_NAMES = ("api_server", "engine_core")


def import_segments(log: str) -> list[dict[str, int]]:
    """Per interpreter, in the order they started: module -> self microseconds."""
    segs: list[dict[str, int]] = []
    for line in log.splitlines():
        if line.startswith(HEADER):
            segs.append({})
            continue
        m = IMPORT_LINE.match(line)
        if not m or not segs:
            continue
        if m.group(4) not in segs[-1]:
            segs[-1][m.group(4)] = int(m.group(1))
            continue
        older = [seg for seg in segs[:-1] if m.group(4) not in seg]  # another interpreter's, still importing:
        if older:  # the busiest of them (the API server, not the launcher or the resource tracker)
            max(older, key=len)[m.group(4)] = int(m.group(1))
    return segs


def main_two(segs: list[dict[str, int]]) -> list[dict[str, int]]:
    """The API server's (the first interpreter that imports vllm: ``opentelemetry-instrument`` runs before it, then
    execs it) and the EngineCore's (the largest later one) of a start's interpreters."""
    first = next((i for i, s in enumerate(segs) if "vllm" in s), 0)
    return segs[first:first + 1] + sorted(segs[first + 1:], key=len)[-1:]


def runs(dirs: list[Path]) -> dict[str, list[Path]]:
    """arm -> its ``imports<N>_<arm>`` run folders, in queue order."""
    out: dict[str, list[Path]] = collections.defaultdict(list)
    for _, arm, run in queue_runs(dirs, "imports"):
        out[arm].append(run)
    return out


def imports(dirs: list[Path], top: int = 15) -> None:
    by_arm = {arm: [import_segments((r / "serve.log").read_text(errors="replace")) for r in rs]
              for arm, rs in runs(dirs).items()}
    print("interpreters per start: " + ", ".join(f"{a} {[len(s) for s in segs]}" for a, segs in by_arm.items()))
    by_arm = {arm: [main_two(s) for s in segs] for arm, segs in by_arm.items()}
    if not {"plain", "instr"} <= by_arm.keys():
        raise SystemExit("no imports<N>_plain and imports<N>_instr runs here (gpu-queue --imports N)")
    for i, proc in enumerate(PROCESS_NAMES):
        per: dict[str, list[dict[str, int]]] = {a: [s[i] for s in segs if len(s) > i] for a, segs in by_arm.items()}
        print(f"\n== {proc}: imports' self time, s (modules) per start")
        for arm in ("plain", "instr"):
            print(f"  {arm:<6} " + "  ".join(f"{sum(s.values()) / 1e6:7.3f} ({len(s)})" for s in per[arm]))
        mean = {a: collections.defaultdict(float) for a in ("plain", "instr")}
        for arm in mean:
            for seg in per[arm]:
                for mod, us in seg.items():
                    mean[arm][mod] += us / 1e6 / len(per[arm])
        both = mean["plain"].keys() & mean["instr"].keys()
        only = {m: v for m, v in mean["instr"].items() if m not in mean["plain"]}
        gone = {m: v for m, v in mean["plain"].items() if m not in mean["instr"]}
        shared = sum(mean["instr"][m] - mean["plain"][m] for m in both)
        print(f"  mean difference instr - plain: modules in both {shared:+.3f} s ({len(both)}), only instr "
              f"{sum(only.values()):+.3f} s ({len(only)}), only plain {-sum(gone.values()):+.3f} s ({len(gone)})")
        pkg: dict[str, float] = collections.defaultdict(float)
        for m in both:
            pkg[m.split(".")[0]] += mean["instr"][m] - mean["plain"][m]
        print("  packages (modules in both), largest differences: " + ", ".join(
            f"{p} {d:+.3f}" for p, d in sorted(pkg.items(), key=lambda kv: -abs(kv[1]))[:top]))
        print("  modules (in both), largest differences: " + ", ".join(
            f"{m} {mean['instr'][m] - mean['plain'][m]:+.3f}"
            for m in sorted(both, key=lambda m: -abs(mean["instr"][m] - mean["plain"][m]))[:top]))
        opkg: dict[str, float] = collections.defaultdict(float)
        for m, v in only.items():
            opkg[m.split(".")[0]] += v
        print("  only instr, by package: " + ", ".join(
            f"{p} {v:.3f}" for p, v in sorted(opkg.items(), key=lambda kv: -kv[1])[:top]))


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("imports", __doc__)
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args(argv)
    imports(a.runs, a.top)
