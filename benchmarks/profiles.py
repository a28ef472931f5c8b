"""Two py-spy profiles of one start each (raw, ``--subprocesses --idle --threads``: the GPU overhead queue's
``--profile`` pair, python -m benchmarks overhead gpu-queue), compared where the time goes in one kind of process.

    python -m benchmarks profiles PLAIN/profile.txt INSTR/profile.txt [--process EngineCore] [--rate 100] [--top 30]

Per thread of the process (named as Python names it): seconds sampled; of the main thread's, those with a frame of
ours (the agent, OpenTelemetry, wrapt) on its stack. For its main thread: the functions whose
inclusive time (the function or anything it called) and whose own time (the innermost frame: where the thread was,
running or waiting) differ most between the two, in seconds. With ``--idle`` a waiting thread is sampled at the
Python frame it waits in, so a main thread that waits longer (for the GIL, a lock, the GPU driver) shows there.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from benchmarks import command_parser

LINE = re.compile(r"^(.*) (\d+)$")
PROCESS = re.compile(r'process \d+:"[^"]*";?')
THREAD = re.compile(r"^thread \((\d+)\): ?(.*)$")
OURS = ("vllm_otel_startup/", "opentelemetry/", "wrapt/")  # (a wrapper's frame counts: vLLM's call runs under it)


def _function(frame: str) -> str:
    """``fn (path/file.py:123)`` -> ``fn (path/file.py)``: lines of one function are one function."""
    return re.sub(r":\d+\)$", ")", frame)


LAUNCH = "launch"  # --process: the launched process itself (the API server; py-spy may read its title as "")


def load(path: Path, process: str) -> tuple[Counter, Counter, Counter, Counter]:
    """(samples per thread name, inclusive samples per main-thread function, own samples per main-thread function,
    main-thread samples per outermost frame of ours) of the processes whose py-spy frame names ``process``
    (``launch``: the launched process, under no other)."""
    threads: Counter = Counter()
    inclusive: Counter = Counter()
    own: Counter = Counter()
    ours: Counter = Counter()
    for line in path.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if not m:
            continue
        stack_text, count = m.group(1), int(m.group(2))
        procs = PROCESS.findall(stack_text)  # a command line may hold ';' itself: the process frames come first
        if not procs or (len(procs) > 1 if process == LAUNCH else process not in procs[-1]):
            continue
        rest = PROCESS.sub("", stack_text).lstrip(";").split(";")
        t = THREAD.match(rest[0])
        if not t:
            continue
        name = t.group(2) or "?"
        threads[name] += count
        if name != "MainThread":
            continue
        stack = [_function(f) for f in rest[1:]]
        for fn in set(stack):
            inclusive[fn] += count
        outermost = next((f for f in stack if any(o in f for o in OURS)), None)
        if outermost is not None:
            threads["MainThread, a frame of ours on its stack"] += count
            ours[outermost] += count
        own[stack[-1] if stack else "(no Python frame)"] += count
    return threads, inclusive, own, ours


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("profiles", __doc__)
    ap.add_argument("plain", type=Path)
    ap.add_argument("instr", type=Path)
    ap.add_argument("--process", default="EngineCore", help="a text of the process's py-spy frame (its title); "
                    f"{LAUNCH!r}: the launched process (the API server)")
    ap.add_argument("--rate", type=float, default=100.0, help="py-spy's sampling rate (samples a second)")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args(argv)
    (tp, ip, op, _), (ti, ii, oi, ours) = load(a.plain, a.process), load(a.instr, a.process)
    if not tp or not ti:
        raise SystemExit(f"no samples of a process matching {a.process!r} in {a.plain if not tp else a.instr}")
    s = 1.0 / a.rate
    print(f"threads of {a.process} (seconds sampled)        plain    instr")
    for name in sorted(set(tp) | set(ti), key=lambda n: -(tp[n] + ti[n])):
        print(f"  {name[:44]:<44} {tp[name] * s:8.2f} {ti[name] * s:8.2f}")
    for title, p, i in (("inclusive", ip, ii), ("own (innermost frame)", op, oi)):
        print(f"\nmain thread, {title}: largest differences (s)        plain    instr    delta")
        for fn in sorted(set(p) | set(i), key=lambda f: -abs(i[f] - p[f]))[:a.top]:
            print(f"  {fn[-70:]:<70} {p[fn] * s:8.2f} {i[fn] * s:8.2f} {(i[fn] - p[fn]) * s:+8.2f}")
    if ours:
        print("\nmain thread (instr), the outermost frame of ours on its stack (s): a wrapper under vLLM's call")
        for fn, n in ours.most_common(a.top // 3 or 1):
            print(f"  {fn[-70:]:<70} {n * s:8.2f}")
