"""Process identity and cross-process plumbing: which process this is, when it was created, how the trace
context reaches spawned children, and what of the command line may be exported.

Only the standard library is used here: this runs in every Python process at interpreter start.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation.kinds import API_SERVER, EMBEDDED, ENGINE_CORE, HELPER, OTHER, WORKER  # noqa: F401

# What of argv may leave the process: one implementation, in the model wing (re-exported for the agent).
from vllm_otel_startup.model.argv import model_from_argv  # noqa: F401
from vllm_otel_startup.model.redact import REDACTED, redact_argv, redact_url, scrub  # noqa: F401

# Environment handed to spawned children (set around Process.start(), restored right after).
ENV_PARENT = settings.TRACEPARENT.name  # W3C traceparent of the span the child hangs under
ENV_KIND = settings.CHILD_KIND.name  # engine_core | worker
ENV_RANK = settings.CHILD_RANK.name
ENV_LABELS = settings.LABELS.name  # JSON: the API server's fleet label values, for the metrics
SPAWN_ENV = (ENV_PARENT, ENV_KIND, ENV_RANK, ENV_LABELS)

# importing either means the process is about to start an engine of its own (a script, an RL or evaluation framework)
EMBEDDED_TRIGGERS = ("vllm.entrypoints.llm", "vllm.v1.engine.async_llm")
# create_time_source of a later start in a program that builds several engines: it begins at that engine's
# construction (the process was created long before, for the first)
ENGINE_SOURCE = "engine"

# Python helpers that inherit the hook but are not part of the start: never instrument them.
_HELPER_MARKERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "torch._inductor.compile_worker",
    "vllm.model_executor.models.registry",  # model-inspection subprocess, timed from its parent
    "from ctypes import cdll",  # Inductor's vector-ISA probe (`python -c`, 9 per compiling process here)
)


def cmdline() -> list[str]:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read()
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    except OSError:
        return [sys.executable, *sys.argv]


def _is_serve_command(argv: list[str]) -> bool:
    script = [os.path.basename(a) for a in argv[:3]]
    if "serve" in argv and ("vllm" in script or any(a.startswith("vllm.entrypoints") for a in argv[:4])):
        return True
    return any(a.startswith("vllm.entrypoints.openai.api_server") for a in argv[:4])


def classify(argv: list[str], environ: os._Environ | dict = os.environ) -> str:
    joined = " ".join(argv[:6])
    if any(m in joined for m in _HELPER_MARKERS):
        return HELPER
    if "--multiprocessing-fork" in argv:
        return environ.get(ENV_KIND) or OTHER
    if _is_serve_command(argv):
        return API_SERVER
    return OTHER


def create_time_ns() -> tuple[int, str]:
    """Wall-clock creation time of this process, in ns, and where it came from.

    /proc/self/stat gives the start in clock ticks since boot (10 ms); CLOCK_BOOTTIME gives "now" in the
    same time base, so the result is exact to a tick (psutil's btime-based value is only exact to 1 s).
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        start_ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        ticks = os.sysconf("SC_CLK_TCK")
        boot_now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        wall_now = time.time_ns()
        return wall_now - (boot_now - start_ticks * 1_000_000_000 // ticks), "proc"
    except (OSError, ValueError, AttributeError, IndexError):
        return time.time_ns(), "clock"


def child_rank(kind: str) -> int | None:
    """A worker's rank, as its parent announced it around Process.start()."""
    rank = os.environ.get(ENV_RANK, "")
    return int(rank) if kind == WORKER and rank.isdigit() else None


def process_index() -> int | None:
    """The index vLLM gives one of several processes of a kind in the multiprocessing name it spawns it under
    (``EngineCore_DP1``, ``ApiServer_0``); None for a process alone of its kind (``EngineCore``). Read once the
    process runs vLLM's code (multiprocessing sets the name after our hook ran)."""
    import multiprocessing

    name = multiprocessing.current_process().name
    digits = len(name) - len(name.rstrip("0123456789"))
    return int(name[-digits:]) if digits and name != "MainProcess" else None


def process_span_attributes(info: ProcessInfo, phase: str) -> dict[str, Any]:
    """The process span's attributes at its start."""
    attrs: dict[str, Any] = {sc.PHASE: phase, sc.PROCESS_KIND: info.kind, "process.pid": info.pid,
                             "process.parent_pid": os.getppid(), sc.PROCESS_CREATE_TIME_SOURCE: info.create_source}
    if info.rank is not None:
        attrs[sc.WORKER_RANK] = info.rank
    return attrs


class ProcessInfo:
    """Who this process is. (A plain class: a dataclass's class creation would cost every interpreter start.)"""

    __slots__ = ("kind", "pid", "create_ns", "create_source", "hook_ns", "argv", "rank", "root", "embedded")

    def __init__(self, kind: str, pid: int, create_ns: int, create_source: str, hook_ns: int, argv: list[str],
                 rank: int | None = None, root: bool | None = None) -> None:
        self.kind, self.pid, self.create_ns, self.create_source = kind, pid, create_ns, create_source
        self.hook_ns, self.argv, self.rank = hook_ns, argv, rank
        # the start's root: the API server the user ran (an API server spawned by a launcher has a parent)
        self.root = kind == API_SERVER if root is None else root
        self.embedded = False  # the engine in the user's own process (becomes_embedded)

    def may_embed(self) -> bool:
        """A Python program (not vLLM's own child, not a helper) that may start an engine itself: a user's script,
        or a multiprocessing child of any program (``vllm bench startup`` builds each iteration's LLM in one, as
        hosts that start their own workers do). vLLM's own children are spawned through the spawn patch points,
        which hand them ENV_KIND (then they are not OTHER) and ENV_PARENT."""
        return self.kind == OTHER and not os.environ.get(ENV_PARENT)

    def becomes_embedded(self) -> None:
        """It imported vLLM's engine front end: from now on it is the start's root, in the API server's part."""
        self.kind, self.root, self.embedded = API_SERVER, True, True

    @classmethod
    def forked(cls, kind: str, argv: list[str]) -> ProcessInfo:
        """A forked child (no sitecustomize ran in it): it begins at the fork."""
        now = time.time_ns()
        return cls(kind=kind, pid=os.getpid(), create_ns=now, create_source="fork", hook_ns=now, argv=argv,
                   rank=child_rank(kind))

    @classmethod
    def next_engine(cls, argv: list[str]) -> ProcessInfo:
        """A program's later engine (its first one's start is over): its start begins at its construction."""
        now = time.time_ns()
        info = cls(kind=OTHER, pid=os.getpid(), create_ns=now, create_source=ENGINE_SOURCE, hook_ns=now, argv=argv)
        info.becomes_embedded()
        return info

    @classmethod
    def current(cls) -> ProcessInfo:
        hook_ns = time.time_ns()
        argv = cmdline()
        kind = classify(argv)
        create_ns, source = create_time_ns()
        return cls(
            kind=kind,
            pid=os.getpid(),
            create_ns=min(create_ns, hook_ns),
            create_source=source,
            hook_ns=hook_ns,
            argv=argv,
            rank=child_rank(kind),
            root=kind == API_SERVER and not os.environ.get(ENV_PARENT),
        )


def vllm_cache_root() -> str:
    """vLLM's cache root as vLLM resolves it (its own settings, not ours)."""
    root = os.environ.get("VLLM_CACHE_ROOT")
    if root:
        return os.path.expanduser(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "vllm")


def start_mode() -> str:
    """'warm' when vLLM's cache root already holds model-info or compile artifacts, else 'cold'."""
    root = vllm_cache_root()
    for sub in ("modelinfos", "torch_compile_cache"):
        try:
            with os.scandir(os.path.join(root, sub)) as it:
                if any(True for _ in it):
                    return "warm"
        except OSError:
            continue
    return "cold"
