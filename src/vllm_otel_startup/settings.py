"""Every ``OTEL_PYTHON_VLLM_STARTUP_*`` setting, with its default, read one way (docs/configuration.md).
Standard library only: the agent, the model and the command line all read settings here. The
diagnostics that benchmarks set are no setting of the users': diagnostics.py.

Booleans have one grammar: ``1``/``true``/``yes``/``on`` are true, ``0``/``false``/``no``/``off``/``none`` are
false (any case), anything else (unset, empty, a typo) is the default. Numbers that do not parse are the default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PREFIX = "OTEL_PYTHON_VLLM_STARTUP_"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", "none"})


class Setting:
    """One setting. A plain class, not a dataclass: this module is imported at every interpreter start (the
    instrumentor's disabled check), where a dataclass's class creation would cost every start."""

    __slots__ = ("name", "default", "doc", "internal")

    def __init__(self, name: str, default: str, doc: str, internal: bool = False) -> None:
        self.name, self.default, self.doc = name, default, doc
        self.internal = internal  # handed from the API server to its children, not for users

    def __repr__(self) -> str:
        return f"Setting({self.name}={self.default!r})"

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        return (os.environ if environ is None else environ).get(self.name)


def _s(suffix: str, default: str, doc: str, internal: bool = False) -> Setting:
    return Setting(PREFIX + suffix, default, doc, internal)


DISABLED = _s("DISABLED", "false", "true: the instrumentor does nothing in this process")
DIR = _s("DIR", "", "local startup-trace files (the `vllm_startup_file` exporter); default "
         "`$XDG_CACHE_HOME/vllm-otel-startup/starts` (`~/.cache/...`)")
KEEP = _s("KEEP", "20", "newest start files kept there")
FLUSH_MS = _s("FLUSH_MS", "25", "longest wait at a process's ready point for its local hand-over (spans spooled for "
              "the API server, startup metrics recorded) and, with `READY_EXPORT_DELAY_MS=0`, its export (which "
              "goes on in the background; three processes pass a ready point, so a collector that never answers "
              "costs at most 3 × 25 ms)")
READY_EXPORT_DELAY_MS = _s("READY_EXPORT_DELAY_MS", "0", "after a process's ready point: how long its export "
                           "(spans and metrics, to the collector and the local file) and the API server's printed "
                           "breakdown wait, so that its main thread serves its first requests (the readiness probe, "
                           "the API server's last calls to its engine) with no thread of ours beside it. Its spans and "
                           "startup metrics are handed over locally at once (the ready point's `FLUSH_MS`); a process "
                           "that exits sooner exports them at its exit, which an EngineCore its API server stops at "
                           "once may not finish (its spans then never reach the collector). `0` (default): at once")
FAILURE_FLUSH_MS = _s("FAILURE_FLUSH_MS", "1000", "when a process fails or exits before ready: longest wait for its "
                      "local hand-over (startup metrics recorded, spans spooled; no network); its export then waits at "
                      "most `FLUSH_MS`, as at a ready point, and what is left goes with the SDK's shutdown at exit")
EXPORT_EACH_PHASE = _s("EXPORT_EACH_PHASE", "false", "true: a phase's end starts its export at once, on a thread of "
                       "ours, and the batch processor exports every 500 ms (`OTEL_BSP_SCHEDULE_DELAY` unless set): a "
                       "process SIGKILLed right after a phase keeps it. Its cost: an export per phase, each taking the "
                       "GIL beside vLLM's main thread (export CPU, and more waits of the main threads for the GIL). "
                       "Default: spans leave at most every `EXPORT_BUSY_MS` while a process works, on the SDK's "
                       "schedule (every 5 s) while it waits, at the ready point and at exit")
EXPORT_BUSY_MS = _s("EXPORT_BUSY_MS", "30000", "while a process starts and works (no waiting phase open in it): its "
                    "spans leave at most this often (each export takes the GIL beside vLLM's busy main thread), and "
                    "its metrics too; a SIGKILL then loses what ended since the last export. While a waiting phase "
                    "is open (its main thread idle on another process) spans leave on the SDK's schedule "
                    "(`OTEL_BSP_SCHEDULE_DELAY`) and metrics every `METRICS_FLUSH_MS`; both again from the ready "
                    "point on. `0`: the SDK's schedule and `METRICS_FLUSH_MS` throughout")
DEBUG = _s("DEBUG", "false", "true: each process prints to stderr how long its ready-point flush took and what the "
           "agent cost it (`self-cost`: CPU seconds of its threads, its span processor's time, the collections and "
           "imports its watchers saw, on Python >= 3.12 the `PY_UNWIND` callbacks and how often that event was "
           "switched on or off, the exports and how many a phase's end started, the main thread's waits); the "
           "command line shows tracebacks")
SUMMARY = _s("SUMMARY", "true", "false: the API server prints no breakdown at ready (it is printed to stdout, where "
             "vLLM logs, with or without an OTLP endpoint)")
TEMPO_URL = _s("TEMPO_URL", "", "`vllm-otel-startup report` reads a trace id from this Tempo (`--tempo` wins)")
TEMPO_TENANT = _s("TEMPO_TENANT", "", "a multi-tenant Tempo's tenant (`X-Scope-OrgID`)")
JAEGER_URL = _s("JAEGER_URL", "", "`vllm-otel-startup report` reads a trace id from this Jaeger v2 query service "
                "(`/api/v3/traces/<id>`; `--jaeger` wins)")
SAMPLE_HZ = _s("SAMPLE_HZ", "2", "resource sampler rate while a waiting phase is open in the process (its main "
               "thread idles on another process: a tick takes nothing from it, but costs CPU, most in the API server, "
               "which also reads the process tree, the host's cores and the GPUs); `0` turns the sampler "
               "(resource metrics, peaks) off; the exact per-span CPU / disk deltas remain")
SAMPLE_BUSY_MS = _s("SAMPLE_BUSY_MS", "5000", "resource sampler interval while the process works (no waiting phase "
                    "open): every tick of a thread of ours takes the GIL from vLLM's main thread, so it is rare; "
                    "between ticks each span's start and end read the same. `0`: `SAMPLE_HZ` throughout")
GPU_SAMPLE_HZ = _s("GPU_SAMPLE_HZ", "2", "API server: how often the sampler reads the GPUs through NVML (memory, "
                   "utilisation, power, PCIe counters: the hw.gpu.* series), from the first process it starts on "
                   "(before it, nothing runs on a GPU); `0` turns those readings off (the GPU "
                   "model and each span's per-process GPU memory remain). At most SAMPLE_HZ")
SAMPLE_TAIL_MS = _s("SAMPLE_TAIL_MS", "2000", "how long the sampler goes on after ready before it stops (with a "
                    "last metrics export)")
METRICS_FLUSH_MS = _s("METRICS_FLUSH_MS", "5000", "metrics export interval while a process is starting (the SDK's "
                      "own `OTEL_METRIC_EXPORT_INTERVAL` applies after)")
LIVE_INTERVAL_MS = _s("LIVE_INTERVAL_MS", "5000", "while a process starts: how often it refreshes its in-progress "
                      "state (the `vllm.startup.in_progress.*` series, the status endpoint, a `Startup in progress` "
                      "span when the phase changed or a minute passed) and the API server prints its one-line "
                      "progress message; `0`: off (no in-progress series, no progress message, no status endpoint)")
STATUS_PORT = _s("STATUS_PORT", "", "API server: serve the start's status (`/status`, JSON) and its in-progress "
                 "series (`/metrics`) on this port (`PORT` or `HOST:PORT`, host default `0.0.0.0`: no authentication, "
                 "it shows the model, pids and the last error; IPv4 only) from the first milliseconds of the start "
                 "until ready; unset: no server (nothing imported)")
HISTORY = _s("HISTORY", "", "more recorded starts the readiness estimate may learn from besides `DIR` (a fleet's "
             "shared directory or glob of `*.jsonl[.gz]` files; `os.pathsep`-separated)")
LABELS = _s("LABELS", "", "the API server's fleet label values (JSON), set around `Process.start()`", internal=True)
TRACEPARENT = _s("TRACEPARENT", "", "W3C traceparent of the span a spawned child hangs under", internal=True)
CHILD_KIND = _s("CHILD_KIND", "", "`engine_core` or `worker`: what a spawned child is", internal=True)
CHILD_RANK = _s("CHILD_RANK", "", "a spawned worker's global rank", internal=True)

ALL: tuple[Setting, ...] = (DISABLED, DIR, KEEP, FLUSH_MS, READY_EXPORT_DELAY_MS, FAILURE_FLUSH_MS,
                            EXPORT_EACH_PHASE, EXPORT_BUSY_MS, DEBUG, SUMMARY,
                            TEMPO_URL, TEMPO_TENANT, JAEGER_URL, SAMPLE_HZ, SAMPLE_BUSY_MS, GPU_SAMPLE_HZ,
                            SAMPLE_TAIL_MS, METRICS_FLUSH_MS, LIVE_INTERVAL_MS, STATUS_PORT, HISTORY, LABELS,
                            TRACEPARENT, CHILD_KIND, CHILD_RANK)


def flag(setting: Setting, environ: Mapping[str, str] | None = None) -> bool:
    value = (setting.raw(environ) or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return setting.default in _TRUE


def number(setting: Setting, environ: Mapping[str, str] | None = None, minimum: float = 0.0) -> float:
    try:
        return max(minimum, float(setting.raw(environ) or setting.default))
    except ValueError:
        return float(setting.default)


def seconds_from_ms(setting: Setting, environ: Mapping[str, str] | None = None) -> float:
    return number(setting, environ) / 1000.0


def text(setting: Setting, environ: Mapping[str, str] | None = None) -> str:
    return setting.raw(environ) or setting.default


SDK_DISABLED = "OTEL_SDK_DISABLED"  # OpenTelemetry's "no telemetry" switch (the SDK's reading: "true", any case)
DISABLED_INSTRUMENTATIONS = "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"  # opentelemetry-instrument's, comma-separated
ENTRY_POINT = "vllm_startup"  # our instrumentor's, distro's and configurator's entry-point name


def switched_off(environ: Mapping[str, str] | None = None) -> str | None:
    """The off switch that is on, or None: ``OTEL_SDK_DISABLED=true``, our instrumentor named (or ``*``) in
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``, or our own ``DISABLED``. Under any of them nothing of ours runs:
    no SDK, patch, thread, output or file (opentelemetry-instrument still loads our distro and configurator as
    entry points; they return at once)."""
    env = os.environ if environ is None else environ
    if env.get(SDK_DISABLED, "").strip().lower() == "true":
        return SDK_DISABLED
    if {x.strip() for x in env.get(DISABLED_INSTRUMENTATIONS, "").split(",")} & {ENTRY_POINT, "*"}:
        return DISABLED_INSTRUMENTATIONS
    if flag(DISABLED, env):
        return DISABLED.name
    return None


def start_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where the local start files are written and read."""
    env = os.environ if environ is None else environ
    d = text(DIR, env)
    if d:
        return os.path.expanduser(d)
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "vllm-otel-startup", "starts")
