"""A start in progress, as it runs: the open phase stack of each process, how long it has been in its innermost
phase and in the whole start, and (API server) when it is expected to be ready.

The span processor tells ``Live`` which startup spans open and close; everything else runs on one daemon thread
per process, every ``OTEL_PYTHON_VLLM_STARTUP_LIVE_INTERVAL_MS`` (default 5 s) until the process's ready point,
never on vLLM's path:

- every process: the ``vllm.startup.in_progress.*`` series (observable gauges read at the metrics export, which
  runs on its own thread), and a zero-length ``Startup in progress`` span under its process span when its phase
  changed (at most every 15 s) or a minute passed, so a trace store shows a start that has not finished;
- the EngineCore and workers: their state in the spool (``<trace id>/<kind>-<pid>.live``) for the API server;
- the API server: the estimate (model/estimate.py, from recorded starts of the same model and configuration,
  loaded once on this thread), a one-line progress message on stdout, and, when ``STATUS_PORT`` is set, the
  status endpoint (agent/live/status_server.py: imported only then).

At the ready point the series stop (the gauges report nothing once the process is done) and the status server
closes. Nothing here raises into the host.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation import threads
from vllm_otel_startup.agent.foundation.kinds import TRACED
from vllm_otel_startup.agent.foundation.patch_points import SPAN_PHASES, WAITING_SPANS
from vllm_otel_startup.agent.foundation.process import ProcessInfo

if TYPE_CHECKING:
    from vllm_otel_startup.model.estimate import Estimate, Recorded

_log = logging.getLogger("vllm_otel_startup")
PROGRESS_EVERY_S = 60.0  # a "Startup in progress" record at least this often ...
PROGRESS_MIN_S = 15.0  # ... and on a phase change, at most this often
LIVE_SUFFIX = ".live"
_KIND_ORDER = {kind: i for i, kind in enumerate(TRACED)}


def metric_phase(p: dict[str, Any]) -> tuple[str, float]:
    """The phase a process's in-progress gauge names, and its elapsed seconds: the innermost open phase that has a
    metric (semconv.METRIC_PHASES, so the fleet has a usual time for it), or the innermost one when it only waits
    (stuck-in-phase alerts leave waiting phases out)."""
    stack = p.get("stack") or []
    if not (stack and stack[-1].get("waiting")):
        for e in reversed(stack):
            if e["phase"] in sc.METRIC_PHASES:
                return e["phase"], float(e["elapsed_s"])
    return p["phase"], float(p["phase_elapsed_s"])


class LiveHost(Protocol):
    """What a start in progress needs of the process's runtime (runtime.Runtime provides it)."""

    info: ProcessInfo
    active: bool
    done: bool
    facts: dict[str, Any]  # the start's facts so far (the estimate's match)
    last_error: BaseException | None
    process_span: Any  # this process's span (the progress records hang under it)
    tracer: Any
    sampler: Any  # resources.sampler.Sampler: its thread runs the refresh (Sampler.every)

    @property
    def open_segment(self) -> tuple[str, int] | None: ...

    def trace_id(self) -> str: ...

    def fleet(self) -> dict[str, str]: ...


def start_live(rt: LiveHost, interval_s: float) -> Live | None:
    """This process's start in progress, started; None where it could not be (it is optional)."""
    try:
        live = Live(rt, interval_s)
        live.start()
    except Exception:  # noqa: BLE001 - the in-progress view is optional
        _log.debug("in-progress state unavailable", exc_info=True)
        return None
    return live


class Live:
    """This process's start in progress (one per process, owned by the runtime)."""

    def __init__(self, rt: LiveHost, interval_s: float) -> None:
        self.rt = rt
        self.interval = interval_s
        self._open: dict[int, tuple[int, str, str, bool, int]] = {}  # span id -> (start, name, phase, waiting, n)
        self._ended: dict[tuple[str, str], int] = {}  # (name, phase) -> spans of it ended here (occurrences)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.outcome: str | None = None  # set at the ready point (ready, failed, exited)
        self.labels: dict[str, str] | None = None  # fleet labels, refreshed on each tick
        self.history: list[Recorded] | None = None  # recorded starts (API server; loaded on the first tick)
        self.estimate: Estimate | None = None
        self.matches = 0
        self.children: list[dict[str, Any]] = []  # the EngineCore's / workers' last states (API server)
        self.server: Any = None  # status_server.StatusServer (API server, opt-in)
        self._progress: tuple[str, float] | None = None  # (phase, monotonic time) of the last progress span
        self._written: list[tuple[int, str]] | None = None  # a child: the open phases its last spool state had

    # ---- what the span processor reports (any thread) -------------------------------------------------------
    def opened(self, span: Any, phase: str) -> None:
        if phase in sc.DETAIL_PHASES or span.name in (sc.GC_SPAN, sc.IMPORT_SPAN) or not span.start_time:
            return
        key = (span.name, phase)
        with self._lock:
            n = self._ended.get(key, 0) + sum(1 for o in self._open.values() if (o[1], o[2]) == key)
            self._open[span.context.span_id] = (span.start_time, span.name, phase, span.name in WAITING_SPANS, n)

    def closed(self, span_id: int) -> None:
        with self._lock:
            o = self._open.pop(span_id, None)
            if o is not None:
                self._ended[(o[1], o[2])] = self._ended.get((o[1], o[2]), 0) + 1

    # ---- state ----------------------------------------------------------------------------------------------
    def snapshot(self, now_ns: int | None = None) -> dict[str, Any]:
        """This process's open phases (outermost first) and elapsed times, as the status endpoint shows them."""
        now = now_ns or time.time_ns()
        with self._lock:
            entries = [(s, name, phase, waiting, n) for s, name, phase, waiting, n in self._open.values()]
        seg = self.rt.open_segment
        if seg is not None and seg[0] in SPAN_PHASES:
            entries.append((seg[1], seg[0], SPAN_PHASES[seg[0]], False, 0))
        entries.sort(key=lambda e: e[0])
        stack = [{"phase": phase, "name": name, "start_ns": s, "elapsed_s": round(max(0, now - s) / 1e9, 3),
                  "waiting": waiting, "occurrence": n} for s, name, phase, waiting, n in entries]
        info = self.rt.info
        top = stack[-1] if stack else None
        out = {"process_kind": info.kind, "pid": info.pid, "phase": top["phase"] if top else None,
               "name": top["name"] if top else None, "phase_elapsed_s": top["elapsed_s"] if top else 0.0,
               "elapsed_s": round(max(0, now - info.create_ns) / 1e9, 3), "stack": stack, "at_ns": now}
        if info.rank is not None:
            out["rank"] = info.rank
        return out

    def processes(self) -> list[dict[str, Any]]:
        """The start's processes as last seen: this one now, the children from their last spool write (their
        elapsed times moved on to now)."""
        now = time.time_ns()
        out = [self.snapshot(now)]
        for c in self.children:
            moved = max(0, now - int(c.get("at_ns") or now)) / 1e9
            stack = [dict(e, elapsed_s=round(e["elapsed_s"] + moved, 3)) for e in c.get("stack", [])]
            c = dict(c, elapsed_s=round(c["elapsed_s"] + moved, 3),
                     phase_elapsed_s=round(c["phase_elapsed_s"] + moved, 3), stack=stack)
            out.append(c)
        return sorted(out, key=lambda p: (_KIND_ORDER.get(p["process_kind"], 9), p.get("rank") or 0))

    def status(self) -> dict[str, Any]:
        """The JSON the status endpoint answers."""
        from vllm_otel_startup.model.estimate import where
        from vllm_otel_startup.model.redact import scrub

        rt = self.rt
        procs = self.processes()
        here = where(procs)
        est = self.estimate
        err = rt.last_error
        out: dict[str, Any] = {
            "state": self.outcome or "starting", "trace_id": rt.trace_id(),
            "model": (self.labels or {}).get(sc.MODEL, ""), "elapsed_s": procs[0]["elapsed_s"] if procs else 0.0,
            "phase": here[0]["phase"] if here else None, "phase_name": here[0]["name"] if here else None,
            "phase_process_kind": here[0]["process_kind"] if here else None,
            "phase_elapsed_s": here[0]["elapsed_s"] if here else None,
            "expected_remaining_s": round(est.remaining, 3) if est is not None else None,
            "estimate": est.as_dict() if est is not None else {
                "history": self.matches, "note": "no recorded start of this model and configuration"
                if not self.matches else "the recorded starts never ran this phase"},
            "processes": procs,
            "last_error": scrub(f"{type(err).__name__}: {err}")[:500] if err is not None else None,
        }
        return out

    def fleet_labels(self) -> dict[str, str]:
        if self.labels is None:
            try:
                self.labels = self.rt.fleet()
            except Exception:  # noqa: BLE001
                self.labels = {}
        return self.labels

    def series(self, own_only: bool = False) -> list[tuple[str, float, dict[str, str]]]:
        """The in-progress series of this process (the root: and of the start's other processes, from the spool;
        ``own_only``: not theirs): (metric, value, labels); none once the process is past its ready point."""
        if self.outcome is not None or self.rt.done:
            return []
        fleet = self.fleet_labels()
        tid = self.rt.trace_id()
        procs = self.processes() if self.rt.info.root and not own_only else [self.snapshot()]
        out = []
        for p in procs:
            if not p.get("phase"):
                continue
            labels = {**fleet, sc.PROCESS_KIND: p["process_kind"], sc.TRACE_ID: tid}
            # only the phase gauge carries the phase: a label that changes starts a new series each time
            out.append(("vllm.startup.in_progress.elapsed", float(p["elapsed_s"]), labels))
            phase, seconds = metric_phase(p)
            out.append(("vllm.startup.in_progress.phase_elapsed", seconds, {**labels, sc.PHASE: phase}))
        est = self.estimate
        if est is not None and self.rt.info.root:
            out.append(("vllm.startup.in_progress.remaining", est.remaining, {**fleet, sc.TRACE_ID: tid}))
        return out

    def own_series(self) -> list[tuple[str, float, dict[str, str]]]:
        """Only this process's own series (what it exports over OTLP: each child exports its own)."""
        return self.series(own_only=True)

    # ---- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.rt.info.root and settings.text(settings.STATUS_PORT):
            from vllm_otel_startup.agent.live import status_server  # opt-in: not even imported otherwise

            self.server = status_server.start(self, settings.text(settings.STATUS_PORT))
        sampler = getattr(self.rt, "sampler", None)
        if self.interval > 0 and not (sampler is not None and sampler.every(self.interval, self._job)):
            # no sampler thread to share (SAMPLE_HZ=0): a thread of its own
            self._thread = threads.Thread(target=self._run, name="vllm-otel-startup-live", daemon=True)
            self._thread.start()

    def stop(self, outcome: str) -> None:
        """The ready point (or a failure / exit): the series end, a child's spool state goes, the server closes."""
        self.outcome = outcome
        self._stop.set()
        if not self.rt.info.root:
            from vllm_otel_startup.agent.export import spool

            spool.remove_live(self.rt.trace_id(), self._spool_name())
        if self.server is not None:
            server, self.server = self.server, None
            closing = threads.Thread(target=server.close, name="vllm-otel-startup-status-close", daemon=True)
            if not threads.start(closing):  # interpreter shutdown: closed here (its loop ends within its poll)
                server.close()

    def forget_in_child(self) -> None:
        """A forked child: the parent's status socket is not ours (close our copy), its thread is gone."""
        if self.server is not None:
            self.server.forget()
            self.server = None
        self._stop.set()

    def _spool_name(self) -> str:
        from vllm_otel_startup.agent.export import spool

        return spool.process_name(self.rt.info.kind, self.rt.info.pid) + LIVE_SUFFIX

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.rt.done or not self.rt.active:
                return
            self._job()

    def _job(self) -> None:
        """One refresh while the start is in progress (on the sampler's thread, or the live thread)."""
        if self._stop.is_set() or self.rt.done or not self.rt.active:
            return
        try:
            self.tick()
        except Exception:  # noqa: BLE001 - the in-progress view is best effort
            _log.debug("in-progress tick failed", exc_info=True)

    def tick(self) -> None:
        """One refresh (on the live thread)."""
        from vllm_otel_startup.agent.export import spool

        rt = self.rt
        self.labels = None
        self.fleet_labels()
        snap = self.snapshot()
        tid = rt.trace_id()
        if not rt.info.root:
            if self._stop.is_set():  # stop() removed the state: a tick racing it must not write it back
                return
            # only when its open phases changed: the API server moves a state's elapsed times on from its at_ns
            # (processes), and each write is a few syscalls on our thread beside vLLM's busy main thread
            opened = [(e["start_ns"], e["name"]) for e in snap["stack"]]
            if opened != self._written and spool.write_live(tid, self._spool_name(),
                                                            json.dumps(snap, separators=(",", ":"))):
                self._written = opened
        else:
            self.children = spool.read_live(tid)
            self._estimate()
            if not self._stop.is_set():
                from vllm_otel_startup.model.estimate import progress_line

                threads.say(progress_line(self.processes(), self.estimate, snap["elapsed_s"], self.matches))
        self._record(snap)

    def _estimate(self) -> None:
        from vllm_otel_startup.model import estimate
        from vllm_otel_startup.model.redact import redact_argv

        rt = self.rt
        if self.history is None:
            sources = [settings.start_dir()] + [p for p in settings.text(settings.HISTORY).split(os.pathsep) if p]
            self.history = estimate.load(sources, skip_trace=rt.trace_id())
        facts = {**rt.facts, **{k: v for k, v in self.fleet_labels().items() if k == sc.VLLM_VERSION and v}}
        matches = estimate.matching(self.history, facts, redact_argv(rt.info.argv))
        self.matches = len(matches)
        self.estimate = estimate.estimate(matches, self.processes())

    def _record(self, snap: dict[str, Any]) -> None:
        """A zero-length ``Startup in progress`` span when the phase changed (at most every 15 s) or a minute
        passed: a trace store shows a start that has not finished, and where it is."""
        from opentelemetry import trace

        rt = self.rt
        now = time.monotonic()
        phase = snap.get("phase") or ""
        last = self._progress
        if last is not None and not (now - last[1] >= PROGRESS_EVERY_S or
                                     (phase != last[0] and now - last[1] >= PROGRESS_MIN_S)):
            return
        if rt.process_span is None or rt.done:
            return
        self._progress = (phase, now)
        attrs: dict[str, Any] = {sc.LIVE_PHASE: phase, sc.LIVE_PHASE_STACK: [e["phase"] for e in snap["stack"]],
                                 sc.LIVE_ELAPSED_S: snap["elapsed_s"], sc.LIVE_PHASE_ELAPSED_S: snap["phase_elapsed_s"]}
        if rt.info.root:
            attrs[sc.LIVE_HISTORY] = self.matches
            if self.estimate is not None:
                attrs[sc.LIVE_REMAINING_S] = round(self.estimate.remaining, 3)
        at = time.time_ns()  # zero-length: one instant
        span = rt.tracer.start_span(sc.PROGRESS_SPAN, context=trace.set_span_in_context(rt.process_span),
                                    attributes=attrs, start_time=at)
        span.end(end_time=at)
