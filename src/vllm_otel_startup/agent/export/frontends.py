"""A launcher of several API servers (``--api-server-count``, data parallel): it serves no HTTP itself, so its start
ends when the last of its API servers accepts HTTP. Each spools its spans at its ready point; a thread of ours
watches the spool (never the host's threads) and ends the launcher's start at the last one's ready time, failed if
one of them failed. Until then a waiting span names what the launcher does."""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from opentelemetry import trace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import threads
from vllm_otel_startup.agent.foundation.kinds import API_SERVER
from vllm_otel_startup.agent.foundation.patch_points import SPAN_PHASES

FRONTEND_POLL_S = 0.05  # how often a launcher looks for its API servers' ready points in the spool


class LauncherHost(Protocol):
    """What the watcher needs of the launcher's start (the runtime is one)."""

    done: bool
    process_span: Any
    tracer: Any

    def trace_id(self) -> str: ...

    def finish(self, error: BaseException | None = None, outcome: str | None = None,
               end_ns: int | None = None) -> None: ...


class Frontends:
    def __init__(self, host: LauncherHost, count: int) -> None:
        self.host, self.count, self.since = host, count, time.time_ns()
        self._settled = False
        self._lock = threading.Lock()

    def watch(self) -> None:
        threads.Thread(target=self._watch, daemon=True, name="vllm-otel-startup-frontends").start()

    def _watch(self) -> None:
        while not self.host.done:
            settled = self.settle()
            if settled is not None:
                end_ns, outcome = settled
                self.host.finish(outcome=outcome, end_ns=end_ns)
                return
            time.sleep(FRONTEND_POLL_S)

    def settle(self) -> tuple[int, str | None] | None:
        """Once every API server has spooled its process span: the launcher's wait ended at the last one's ready
        point, and (that time, the outcome: None for ready, "failed" if one failed); None before that, and for
        every caller but the first (the watcher and the exit path may both get here)."""
        from vllm_otel_startup.agent.export import spool

        host = self.host
        tid = host.trace_id()
        if spool.count(tid, spool.process_name(API_SERVER, "")) < self.count:
            return None
        phase = SPAN_PHASES[sc.API_SERVER_PROCESS_SPAN]
        done = [s for s in spool.read(tid) if s.attrs.get(sc.PHASE) == phase]
        if len(done) < self.count:
            return None
        with self._lock:
            if self._settled or host.done:
                return None
            self._settled = True
        end = max(s.end for s in done)
        wait = host.tracer.start_span(sc.API_SERVERS_WAIT_SPAN, start_time=self.since,
                                      context=trace.set_span_in_context(host.process_span))
        wait.end(end_time=max(end, self.since))
        return end, ("failed" if any(s.attrs.get(sc.OUTCOME) != "ready" for s in done) else None)
