"""Where an instrumented start's extra time sits, read from outside the agent (issue 25). Never asserted in tests.

    python scripts/overhead_where.py imports RUNS_DIR [RUNS_DIR ...]
        the ``imports<N>_<arm>`` starts of ``overhead_pairs.py gpu-queue --imports N``: every interpreter's
        ``PYTHONPROFILEIMPORTTIME`` lines in serve.log, split per interpreter (each prints the header first; a
        module already seen in the newest interpreter is given to the latest earlier one without it, as two
        interpreters may import at once). Per process (the API server: the first interpreter; the EngineCore: the
        later one with the most modules, as the resource tracker starts between them) and arm: the imports'
        summed self time and module count, then the packages and modules whose self time differs most between the
        arms, and what only the instrumented arm imports.
    python scripts/overhead_where.py profile RUNS_DIR [RUNS_DIR ...]
        the ``profile<N>_<arm>`` starts of ``gpu-queue --profile`` (py-spy raw output, profile.txt, every process,
        idle threads too): per process kind, its main thread's samples, those with a frame of ours
        (vllm_otel_startup, opentelemetry, wrapt) on the stack, those inside an import, and the functions whose
        inclusive samples differ most between the arms.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

HEADER = "import time: self [us] | cumulative | imported package"
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ?( *)(\S+)\s*$")
PROCESS_NAMES = ("api_server", "engine_core")
OURS = ("vllm_otel_startup", "opentelemetry/", "wrapt/")
PROCESS = re.compile(r'process (\d+):"([^"]*)";')
RUN = re.compile(r"\d+_(imports|profile)(\d+)_(\w+)$")


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
        for seg in reversed(segs):
            if m.group(4) not in seg:
                seg[m.group(4)] = int(m.group(1))
                break
    return segs


def main_two(segs: list[dict[str, int]]) -> list[dict[str, int]]:
    """The API server's (the first) and the EngineCore's (the largest later one) of a start's interpreters."""
    return segs[:1] + sorted(segs[1:], key=len)[-1:]


def runs(dirs: list[Path], label: str) -> dict[str, list[Path]]:
    """arm -> its run folders of that label, in queue order."""
    out: dict[str, list[Path]] = collections.defaultdict(list)
    for d in dirs:
        for run in sorted(p for p in d.iterdir() if p.is_dir()):
            m = RUN.match(run.name)
            if m and m.group(1) == label:
                out[m.group(3)].append(run)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def imports(dirs: list[Path], top: int = 15) -> None:
    by_arm = {arm: [import_segments((r / "serve.log").read_text(errors="replace")) for r in rs]
              for arm, rs in runs(dirs, "imports").items()}
    print("interpreters per start: " + ", ".join(f"{a} {[len(s) for s in segs]}" for a, segs in by_arm.items()))
    by_arm = {arm: [main_two(s) for s in segs] for arm, segs in by_arm.items()}
    if not {"plain", "instr"} <= by_arm.keys():
        raise SystemExit("imports: no imports<N>_plain and imports<N>_instr runs here")
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


def _kind(cmd: str) -> str:
    if "spawn_main" in cmd or "--multiprocessing-fork" in cmd:
        return "spawned"  # the EngineCore (and, with TP > 1, its workers)
    if " serve " in f"{cmd} ":
        return "api_server"
    return "other"


def read_profile(path: Path) -> dict[str, collections.Counter]:
    """kind -> counters of its main threads: ``samples``, ``ours``, ``import`` and each function's inclusive
    samples (``fn:NAME (FILE)``)."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        procs = list(PROCESS.finditer(stack))  # --subprocesses: the process's ancestors first (a command may hold ;)
        if not procs or not n.isdigit():
            continue
        pid, cmd = procs[-1].group(1), procs[-1].group(2)
        thread, _, rest = stack[procs[-1].end():].partition(";")
        if not re.match(rf"thread \({pid}\)(:|$)", thread):
            continue  # main threads only: the thread whose id is the process's
        kind = "api_server" if len(procs) == 1 else _kind(cmd)  # the root: its command reads "" once exec'd
        c, count, frames = out[kind], int(n), rest.split(";")
        c["samples"] += count
        if any(o in f for f in frames for o in OURS):
            c["ours"] += count
        if any("_find_and_load" in f for f in frames):
            c["import"] += count
        for fn in {re.sub(r":\d+\)$", ")", f) for f in frames}:
            c["fn:" + fn] += count
    return out


def profile(dirs: list[Path], top: int = 25) -> None:
    found = runs(dirs, "profile")
    profiles = {arm: [read_profile(r / "profile.txt") for r in rs if (r / "profile.txt").exists()]
                for arm, rs in found.items()}
    if not all(profiles.get(a) for a in ("plain", "instr")):
        raise SystemExit("profile: no profile.txt of a profile<N>_plain and a profile<N>_instr run here")
    kinds = sorted({k for ps in profiles.values() for p in ps for k in p})
    for kind in kinds:
        mean = {a: collections.Counter() for a in ("plain", "instr")}
        for arm in mean:
            for p in profiles[arm]:
                for k, v in p.get(kind, {}).items():
                    mean[arm][k] += v / len(profiles[arm])
        print(f"\n== {kind}, main thread(s), samples: " + "; ".join(
            f"{k} plain {mean['plain'][k]:.0f} instr {mean['instr'][k]:.0f}" for k in ("samples", "ours", "import")))
        fns = {k for a in mean for k in mean[a] if k.startswith("fn:")}
        diff = sorted(fns, key=lambda k: -abs(mean["instr"][k] - mean["plain"][k]))[:top]
        for k in diff:
            print(f"  {mean['instr'][k] - mean['plain'][k]:+7.0f}  plain {mean['plain'][k]:6.0f}  {k[3:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["imports", "profile"])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    (imports if a.what == "imports" else profile)(a.runs, a.top)


if __name__ == "__main__":
    main()
