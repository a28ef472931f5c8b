"""Why vLLM's main threads wait: each voluntary context switch of a process's main thread (a "wait" in the overhead
benchmark's counters), classified by the kernel path it slept in, per process and arm.

The overhead benchmark counts waits (``voluntary_ctxt_switches``); a count mixes causes. On the development VM most of
a start's waits were page-cache misses: ``read()`` and ``getdents64()`` sleeping on a file page or directory block
being read from disk (its cold file pages are reclaimed between starts), in every arm, plain included, by hundreds
from one start to the next (docs/lab/overhead.md). A thread of ours makes the main thread wait on a futex: the GIL
handed to it, or a lock. So this benchmark records, with ``perf record -a -g -e sched:sched_switch -e
sched:sched_waking`` from the launch to the first ``/health`` 200, every switch of each vLLM process's main thread that
was not a preemption, and names its cause from the kernel call chain:

  disk         a file page or directory block being read in (folio / bit wait, io_schedule)
  futex        the GIL or a lock (any futex wait)
  pipe/socket  a pipe, socket, poll or epoll wait (the engine's ZMQ handshake, a child's pipe)
  child        a child process (vfork, wait4)
  sleep        a timed sleep
  other        anything else (its first kernel frame is kept)

  python -m benchmarks wait-causes cpu [--rounds N] [--variant NAME=K=V,...] [--out F]   (perf, as root)
  python -m benchmarks wait-causes read ARM=PERF_SCRIPT.txt ...   (``perf script -F comm,pid,tid,time,trace,ip,sym``)

A futex wait ends when another thread wakes the sleeper: with ``sched:sched_waking`` recorded too, each futex wait
of a main thread is also named by the thread that woke it, the one that held the GIL (or lock) it wanted
(``sched_waking`` fires in the waker; ``sched_wakeup`` fires where the wake-up lands, for a sleeper on an idle CPU
in that CPU's idle task, so a recording of it names most wakers ``swapper``), by its OS-level name: ``vos-…`` a
thread of ours (agent/foundation/threads.py names them); a thread alive at ready by its Python name where py-spy is
on PATH (``otel-span-export``, ``otel-metric-read``: OpenTelemetry's); ``unnamed`` a Python thread the OS knows by
its process's name (without py-spy: OpenTelemetry's batch span processor and metric reader, vLLM's own Python
threads; one started before vLLM renamed its process keeps the older name, ``python`` or ``vllm``; a thread of ours
before it named itself); another name a native thread (ZMQ, PyTorch); ``swapper`` a wake-up in an idle CPU's
interrupt (a timed wait that timed out: a thread waiting for the GIL wakes every 5 ms to ask for it); ``no
wake-up`` where none was recorded.

``cpu`` runs the overhead benchmark's arms (plain, the agent, each ``--variant``; a Latin-square order, round 0 a
warm-up not counted) on the e2e suite's tiny model, and prints per process the median count of each cause over the
rounds, then of each waker. Not a wall-clock measure: perf's own recording costs the host CPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from benchmarks import command_parser
from benchmarks.proc_threads import descendants
from benchmarks.threads import kind_of

CAUSES: tuple[tuple[str, tuple[str, ...]], ...] = (  # the first cause with a frame that begins so wins
    ("futex", ("futex_", "__futex", "do_futex", "__x64_sys_futex")),
    ("disk", ("folio_wait", "bit_wait_io", "io_schedule", "wait_on_page", "__lock_folio", "filemap_")),
    ("pipe/socket", ("anon_pipe", "pipe_read", "pipe_write", "poll_schedule", "do_epoll_wait", "do_select",
                     "sk_wait", "unix_stream", "tcp_recvmsg")),
    ("child", ("do_wait", "__wait_for_common", "kernel_clone")),
    ("sleep", ("do_nanosleep", "hrtimer_nanosleep")),
)
ORDER = ("futex", "disk", "pipe/socket", "child", "sleep", "other")
# the scheduler's own frames, above the one that says why
SCHEDULER = ("__schedule", "schedule", "schedule_timeout", "schedule_hrtimeout", "io_schedule_timeout",
             "preempt_schedule")
HEADER = re.compile(r"\s*(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+[\d.]+:\s+prev_comm=.*?"
                    r"prev_state=(?P<state>\S+) ==>")
WAKE = re.compile(r"\s*(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+[\d.]+:\s+comm=.*? pid=(?P<target>\d+) prio=")
WAKER = "by:"  # a Counter key naming the thread that woke a futex wait: "by:vos-sampler"
NO_WAKER = "no wake-up"
PYTHON_NAMES = {"OtelBatchSpanRecordProcessor": "otel-span-export", "OtelPeriodicExportingMetricReader":
                "otel-metric-read"}  # OpenTelemetry's threads, short
THREAD = re.compile(r"Thread (?P<tid>\d+) \([^)]*\): \"(?P<name>.*)\"")  # a line of `py-spy dump`
ROLES = {"engine_core": "EngineCore", "worker": "worker"}  # threads.kind_of's kinds, as the table names them


def cause(kernel_frames: list[str]) -> str:
    """The cause of one switch from its kernel frames (innermost first)."""
    for name, prefixes in CAUSES:
        if any(f.startswith(prefixes) for f in kernel_frames):
            return name
    rest = [f for f in kernel_frames if not f.startswith(SCHEDULER)]
    return f"other: {rest[0]}" if rest else "other"


def switches(lines: Iterable[str]) -> Iterable[tuple[int, str, str]]:
    """``(pid, comm, cause)`` of every voluntary switch of a main thread (tid == pid) in ``perf script`` text."""
    for row in waits(lines):
        yield row[:3]


def waker_name(comm: str, tid: int, sleeper_comm: str, names: dict[int, str] | None = None) -> str:
    """A waker by its OS-level name where that is ours (``vos-…``), else its Python name where ``names`` (thread id ->
    name, read at ready) has it, else ``unnamed`` where the OS names it as the sleeper's process, else its OS name."""
    if comm.startswith("vos-"):
        return comm
    if names and tid in names:
        return PYTHON_NAMES.get(names[tid], names[tid])
    return "unnamed" if comm == sleeper_comm else comm


def waits(lines: Iterable[str], names: dict[int, str] | None = None) -> Iterable[tuple[int, str, str, str | None]]:
    """``(pid, comm, cause, waker)`` of every voluntary switch of a main thread: ``waker`` (futex waits, where the
    recording has ``sched_waking`` events) the thread that woke it (waker_name); a wait is given once its wake-up is
    seen (or at the end, with ``NO_WAKER``)."""
    head: re.Match[str] | None = None
    frames: list[str] = []
    asleep: dict[int, tuple[int, str, str]] = {}  # main thread -> its futex wait, until a wake-up names the waker
    unwoken: list[tuple[int, str, str]] = []  # futex waits no wake-up ended, before any wake-up was seen
    woken = False  # any wake-up recorded (else the recording has none, and no waker is named)

    def no_waker(row: tuple[int, str, str]) -> Iterable[tuple[int, str, str, str | None]]:
        if woken:
            yield (*row, NO_WAKER)
        else:
            unwoken.append(row)

    def done() -> tuple[int, str, str] | None:
        if head is None or head["pid"] != head["tid"] or head["state"].startswith("R"):
            return None  # another thread, or a preemption (still runnable)
        return int(head["pid"]), head["comm"], cause(frames)

    def ended() -> Iterable[tuple[int, str, str, str | None]]:
        if (row := done()) is None:
            return
        if row[2] == "futex":
            if row[0] in asleep:  # its last wait's wake-up not recorded
                yield from no_waker(asleep.pop(row[0]))
            asleep[row[0]] = row
        else:
            yield (*row, None)

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            yield from ended()
            head, frames = None, []
        elif head is None:
            head = HEADER.match(line)
            if head is None and (wake := WAKE.match(line)) is not None:
                if not woken:
                    woken = True
                    yield from ((*row, NO_WAKER) for row in unwoken)
                target = int(wake["target"])
                if target in asleep and wake["tid"] != wake["target"]:
                    pid, comm, why = asleep.pop(target)
                    yield pid, comm, why, waker_name(wake["comm"], int(wake["tid"]), comm, names)
        elif "[kernel.kallsyms]" in line:  # "  ffffffff82248208 __schedule ([kernel.kallsyms])"
            parts = line.split()
            if len(parts) >= 2:
                frames.append(parts[1])
    yield from ended()
    for row in [*unwoken, *asleep.values()]:
        yield (*row, NO_WAKER if woken else None)


def role(pid: int, comm: str, api_pid: int | None) -> str | None:
    if pid == api_pid:
        return "API server"
    kind = kind_of(comm)
    if kind is not None:
        return ROLES[kind]
    if comm.startswith("VLLM::"):
        return "other vLLM"
    return "API server" if api_pid is None and comm == "vllm" else None


def per_process(lines: Iterable[str], api_pid: int | None = None, procs: dict[int, str] | None = None,
                names: dict[int, str] | None = None) -> dict[str, Counter]:
    """Each vLLM process's main-thread waits by cause, and its futex waits by waker (``by:NAME`` keys; several
    processes of a role: summed; ``names``: Python thread names, waker_name). ``procs``: the start's
    process tree at ready, pid -> its name then (perf's own name for a process may be the one before vLLM renamed
    it); without it, the names perf recorded, and the API server is ``api_pid`` or the process named ``vllm``."""
    last_comm: dict[int, str] = {}
    by_pid: dict[int, Counter] = {}
    for pid, comm, why, waker in waits(lines, names):
        last_comm[pid] = comm  # a process renames itself (VLLM::EngineCore) after its first switches
        counts = by_pid.setdefault(pid, Counter())
        counts[why.split(":")[0]] += 1
        if waker is not None:
            counts[WAKER + waker] += 1
    out: dict[str, Counter] = {}
    for pid, counts in by_pid.items():
        if procs is not None and pid not in procs:
            continue  # not of this start
        name = role(pid, procs[pid] if procs is not None else last_comm[pid], api_pid)
        if name is not None:
            out.setdefault(name, Counter()).update(counts)
    return out


def tree(root: int) -> dict[int, str]:
    """``root`` and its descendants now: pid -> name (/proc). A process vLLM did not title (without our agent, whose
    proctitle repair it lacks, its EngineCore stays ``python``: threads.titled) is named by its place: the API
    server's child that has children of its own is the EngineCore, their children its workers (the multiprocessing
    resource tracker has none)."""
    out: dict[int, str] = {}
    kids: dict[int, list[int]] = {}
    for pid in descendants(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone
        out[pid] = stat[stat.index("(") + 1:stat.rindex(")")]
        kids.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(pid)  # its parent's pid
    for ec in (c for c in kids.get(root, []) if kids.get(c) and not out[c].startswith("VLLM::")):
        out[ec] = "VLLM::EngineCor"
        for worker in kids[ec]:
            if not out[worker].startswith("VLLM::"):
                out[worker] = "VLLM::Worker"
    return out


def read_meta(text: Path) -> tuple[int | None, dict[int, str] | None, dict[int, str] | None]:
    """The API server's pid, the process tree at ready and the Python names of the threads alive then, from the JSON
    beside a `perf script` text."""
    meta = text.with_suffix(".json")
    if not meta.is_file():
        return None, None, None
    doc = json.loads(meta.read_text())

    def ints(key: str) -> dict[int, str] | None:
        got = doc.get(key)
        return {int(k): v for k, v in got.items()} if isinstance(got, dict) else None

    return doc.get("pid"), ints("procs"), ints("threads")


def python_threads(pids: Iterable[int]) -> dict[int, str]:
    """Thread id -> Python name of every thread of ``pids`` now, from ``py-spy dump`` where py-spy is on PATH (the
    OS knows a Python thread only by its process's name); else nothing."""
    spy = shutil.which("py-spy")
    out: dict[int, str] = {}
    for pid in pids if spy else ():
        try:
            text = subprocess.run([spy, "dump", "--nonblocking", "--pid", str(pid)], capture_output=True, text=True,
                                  timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        out.update({int(m["tid"]): m["name"] for m in map(THREAD.match, text.splitlines()) if m})
    return out


def table(arms: dict[str, list[dict[str, Counter]]]) -> str:
    """Per process, per arm: the median of each cause over the arm's starts."""
    roles = [r for r in ("API server", "EngineCore", "worker", "other vLLM")
             if any(r in start for starts in arms.values() for start in starts)]
    out = [f"{'process':<11} {'arm':<12} {'starts':>6} {'all':>6} " + " ".join(f"{c:>11}" for c in ORDER)]
    for r in roles:
        for arm, starts in arms.items():
            have = [s.get(r, Counter()) for s in starts]
            med = {c: statistics.median(s[c] for s in have) for c in ORDER}
            total = statistics.median(sum(s[c] for c in ORDER) for s in have)
            out.append(f"{r:<11} {arm:<12} {len(have):>6} {total:>6g} " + " ".join(f"{med[c]:>11g}" for c in ORDER))
    return "\n".join(out)


def waker_table(arms: dict[str, list[dict[str, Counter]]], top: int = 8) -> str:
    """Per process, per arm: the median count of futex waits each waker ended (the ``top`` wakers over all arms of
    the process, the rest summed as ``rest``); empty where the recordings had no wake-ups."""
    out = []
    roles = [r for r in ("API server", "EngineCore", "worker", "other vLLM")
             if any(r in start for starts in arms.values() for start in starts)]
    for r in roles:
        every: Counter = Counter()
        for starts in arms.values():
            for s in starts:
                every.update({k[len(WAKER):]: v for k, v in s.get(r, Counter()).items() if k.startswith(WAKER)})
        if not every:
            continue
        names = [n for n, _ in every.most_common(top)]
        out.append(f"{r + ': futex waits by waker':<34} " + " ".join(f"{n[:18]:>18}" for n in [*names, "rest"]))
        for arm, starts in arms.items():
            have = [s.get(r, Counter()) for s in starts]
            med = [statistics.median(s[WAKER + n] for s in have) for n in names]
            rest = statistics.median(sum(v for k, v in s.items() if k.startswith(WAKER) and k[len(WAKER):]
                                         not in names) for s in have)
            out.append(f"  {arm:<32} " + " ".join(f"{m:>18g}" for m in [*med, rest]))
    return "\n".join(out)


def perf_ready() -> str | None:
    """Why perf cannot record here, or None."""
    if shutil.which("perf") is None:
        return "no perf on PATH (Debian: apt-get install linux-perf)"
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    if os.geteuid() != 0 and paranoid.exists() and int(paranoid.read_text()) > -1:
        return f"perf_event_paranoid is {paranoid.read_text().strip()}: run as root (a system-wide recording)"
    return None


def record_start(model: Path, cache: Path, backends, arm_env: dict[str, str] | None, files: Path, out: Path) -> Path:
    """One start under ``perf record``; its ``perf script`` text beside ``out`` (the raw recording removed)."""
    from support import harness

    perf: dict[str, subprocess.Popen] = {}
    meta: dict[str, object] = {}

    def on_start(proc) -> None:
        meta["pid"] = proc.pid
        perf["p"] = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-e", "sched:sched_switch", "-e",
                                      "sched:sched_waking", "-o", str(out)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def on_ready(proc) -> None:
        meta["procs"] = tree(proc.pid)
        time.sleep(0.2)
        perf["p"].send_signal(signal.SIGINT)
        perf["p"].wait(120)
        meta["threads"] = python_threads(meta["procs"])

    instr = arm_env is not None
    try:
        harness.serve(model, cache, backends if instr else None, args=["--enforce-eager"], instrument=instr,
                      env={"TORCHINDUCTOR_VEC_ISA_OK": "", **(arm_env or {})}, files=files, expect_ready=False,
                      timeout=600, scrape=False, on_start=on_start, on_ready=on_ready)
    finally:
        if "p" in perf and perf["p"].poll() is None:
            perf["p"].send_signal(signal.SIGINT)
            perf["p"].wait(120)
    text = out.with_suffix(".txt")
    with text.open("w") as f:
        subprocess.run(["perf", "script", "-i", str(out), "-F", "comm,pid,tid,time,trace,ip,sym,dso"], stdout=f,
                       stderr=subprocess.DEVNULL, check=True)
    out.unlink(missing_ok=True)
    text.with_suffix(".json").write_text(json.dumps(meta))
    return text


def cpu(rounds: int, variants: dict[str, dict[str, str]], work: Path) -> dict[str, list[dict[str, Counter]]]:
    from benchmarks.pairs import arms_of
    from support import harness

    model = work / "tiny-model"
    if not (model / "config.json").exists():
        harness.make_tiny_model(model)
    backends = harness.Backends(work / "backends").start()
    arms: dict[str, list[dict[str, Counter]]] = {}
    try:
        for rnd in range(rounds + 1):  # round 0 warms the caches and is not counted
            for arm, env in arms_of(rnd, variants):
                text = record_start(model, work / "cache-eager", backends, env, work / "starts",
                                    work / f"r{rnd}-{arm}.data")
                with text.open() as f:
                    counts = per_process(f, *read_meta(text))
                print(f"  round {rnd}{' (warm-up)' if rnd == 0 else ''} {arm}: "
                      + ", ".join(f"{r} {sum(c.values())}" for r, c in counts.items()), flush=True)
                if rnd:
                    arms.setdefault(arm, []).append(counts)
    finally:
        backends.stop()
    return arms


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("wait-causes", __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--variant", action="append", default=[], help="NAME=K=V,...: one more arm (as in overhead cpu)")
    c.add_argument("--workdir", type=Path, default=None)
    r = sub.add_parser("read")
    r.add_argument("runs", nargs="+", help="ARM=FILE: a `perf script` text (FILE.json beside it, as `cpu` writes "
                   "it, may name the API server's pid and the process tree at ready)")
    for p in (c, r):
        p.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "cpu":
        from benchmarks.pairs import parse_variants

        if a.rounds < 1:
            raise SystemExit(f"--rounds {a.rounds}: one or more")
        if (why := perf_ready()) is not None:
            raise SystemExit(f"wait-causes cpu: {why}")
        import tempfile

        work = a.workdir or Path(tempfile.mkdtemp(prefix="vos-waits-"))
        arms = cpu(a.rounds, parse_variants(a.variant), work)
    else:
        arms = {}
        for spec in a.runs:
            arm, sep, name = spec.partition("=")
            path = Path(name)
            if not sep or not path.is_file():
                raise SystemExit(f"{spec!r}: ARM=FILE, FILE a `perf script` text")
            with path.open() as f:
                arms.setdefault(arm, []).append(per_process(f, *read_meta(path)))
    print(table(arms))
    if wakers := waker_table(arms):
        print(wakers)
    if a.out:
        a.out.write_text(json.dumps({arm: [{r: dict(c) for r, c in s.items()} for s in starts]
                                     for arm, starts in arms.items()}, indent=1))
    return 0
