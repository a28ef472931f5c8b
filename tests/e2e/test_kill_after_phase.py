"""A start killed right after a phase ends: is that phase kept? Two real instrumented `vllm serve` starts (eager),
the worker killed within 0.25 s of its `Init device` phase ending, once with SIGKILL and once with SIGTERM.

The trigger is seen from outside and does not depend on our export: the worker's `Init device` ends, and at once
vLLM logs "Starting to load model" (the first line of `CPUModelRunner.load_model`). A watcher thread tails the
server's log for that line (and the local start file, to measure how soon the phase reached it), then signals the
worker, the process whose phase just ended. The SIGKILL start is also the fault matrix's mid-start kill: what
every process had finished is in the trace store, and the root records the failure:

- SIGKILL 40 ms after the line (the OOM killer picks the biggest process, a worker): nothing runs in the worker
  afterwards, so the phase is kept only because it had already left. With `OTEL_PYTHON_VLLM_STARTUP_EXPORT_EACH_PHASE`
  (set for this start; off by default since issue 25) it is exported as soon as it ends (the span processor wakes an
  export thread per exporter), not at the batch processor's next tick. The 40 ms fall in
  `Create model` (Python code: the export threads get the GIL); what is not guaranteed is said in docs/telemetry.md.
  (The line itself came 3–36 ms after the phase's end here: the export and the logging share the GIL.)
- SIGTERM at once: vLLM's own handler in the worker raises SystemExit, the worker leaves through atexit, where our
  exit hook ends its process span and the SDK's shutdown exports what is left. Not the API server's process group:
  a pod deletion signals PID 1 (the API server) only, and the worker then gets vLLM's own SIGTERM seconds later,
  long after its phases left; a SIGTERM to the whole group in the middle of a start left vLLM 0.32's API server
  waiting in its event loop after its engine exited, instrumented or not (seen while writing this test), a vLLM
  shutdown behaviour the test would hinge on.

The kill window (kill time minus the phase's recorded end) is asserted to be within KILL_WINDOW_S (0.25 s) and
recorded; nothing else here is timed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from support import harness
from support.plans import plan
from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.cli import report

pytestmark = pytest.mark.e2e
PHASE = "Init device"  # a worker phase that ends right before vLLM logs the line below
LINE = re.compile(rb"\(Worker[^)]*\) INFO .*Starting to load model")
RESULTS: dict[str, dict] = {}


class Watcher:
    """Tails the server log and the local start files of one start; sends ``sig`` to the worker ``delay`` s after
    the line."""

    def __init__(self, log: Path, files: Path, sig: int, delay: float) -> None:
        self.log, self.files, self.sig, self.delay = log, files, sig, delay
        self.line_ns = self.kill_ns = self.in_file_ns = None
        self.read: dict[Path, int] = {}

    def __call__(self, proc) -> None:
        self.proc = proc
        threading.Thread(target=self._run, daemon=True, name="kill-watcher").start()

    def _in_file(self) -> bool:
        """The phase is in a local start file (only what was appended since the last look is read)."""
        for p in self.files.glob("*.jsonl"):
            with open(p, "rb") as f:
                f.seek(self.read.get(p, 0))
                new = f.read()
            self.read[p] = self.read.get(p, 0) + len(new) - len(new.rsplit(b"\n", 1)[-1])
            if f'"name":"{PHASE}"'.encode() in new:
                return True
        return False

    def _run(self) -> None:
        deadline = time.monotonic() + 600
        seen = 0
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError), open(self.log, "rb") as f:
                f.seek(seen)
                chunk = f.read()
                if LINE.search(chunk):
                    self.line_ns = time.time_ns()
                    break
                seen += len(chunk) - len(chunk.rsplit(b"\n", 1)[-1])  # complete lines only
            time.sleep(0.002)
        if self.line_ns is None:
            return
        worker = harness.worker_of(self.proc.pid)
        until = self.line_ns + int(self.delay * 1e9)
        while time.time_ns() < until:  # meanwhile: when did the phase reach the local file?
            if self.in_file_ns is None and self._in_file():
                self.in_file_ns = time.time_ns()
            time.sleep(0.002)
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                self.kill_ns = time.time_ns()
                os.kill(worker.pid, self.sig)


IGNORED = re.compile(r"Exception ignored in: (.*)\n(?:(?!Exception ignored in).*\n){0,30}?SystemExit")


def ignored_in(log: str) -> str | None:
    """Where the worker's SystemExit from vLLM's SIGTERM handler was raised and ignored (a finalizer, a gc
    callback), if it was."""
    for m in IGNORED.finditer(log):
        if "signal_handler" in log[m.start():m.end()]:
            return m.group(1)
    return None


def _wait_group_gone(pgid: int, timeout: float = 120) -> bool:
    """Every process of the start has exited (their exit hooks' exports are done); SIGKILL what is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return False


def killed_start(case: str, sig: int, delay: float, tiny_model, workdir, backends, env: dict[str, str] | None = None):
    cache = workdir / "kill"
    port = harness.free_port()
    files = cache / "starts" / case
    files.mkdir(parents=True, exist_ok=True)
    watcher = Watcher(cache / f"serve-{port}.log", files, sig, delay)
    st = harness.serve(tiny_model, cache, backends, args=["--enforce-eager"], port=port, files=files, env=env,
                       name=f"kill-{case}", on_start=watcher, expect_ready=False, timeout=600, warm_modelinfo=True)
    assert watcher.kill_ns is not None, f"never saw the line or never killed; log tail:\n{st.log[-3000:]}"
    if sig == signal.SIGTERM and (where := ignored_in(st.log)) is not None:
        # vLLM raises its SystemExit once; Python ignores an exception raised inside a finalizer or a gc callback
        assert "vllm_otel_startup" not in where and "RetroSpans" not in where, f"our code swallowed it: {where}"
        pytest.skip(f"vLLM's SystemExit was raised inside {where} and ignored: the worker went on (vLLM's race)")
    assert st.ready_ns is None, "the start reached ready: not a kill mid-start"
    gone = _wait_group_gone(st.pid)
    local = [s for f in sorted(files.glob("*.jsonl")) for s in report.load(str(f))]
    [phase] = [s for s in local if s.name == PHASE] or [None]
    window = (watcher.kill_ns - phase.end) / 1e9 if phase is not None else None
    RESULTS[case] = {
        "signal": signal.Signals(sig).name,
        "kill_after_phase_end_s": window,
        "kill_after_log_line_s": (watcher.kill_ns - watcher.line_ns) / 1e9,
        "phase_in_local_file_after_end_s": (watcher.in_file_ns - phase.end) / 1e9
        if (phase is not None and watcher.in_file_ns) else None,
        "group_exited_by_itself": gone,
        "local_spans": len(local), "returncode": st.returncode,
    }
    print(f"\n{case}: {json.dumps(RESULTS[case])}")
    if os.environ.get("VOS_KILL_REPORT"):
        Path(os.environ["VOS_KILL_REPORT"]).write_text(json.dumps(RESULTS, indent=1))
    return st, local, phase, window


# The watcher's reaction: 0.03-0.09 s alone; 0.20 s once, with the fast tests and the layout matrix's first starts
# beside it (a busy 2-core CI host): still "right after the phase", far inside the worker's export interval.
KILL_WINDOW_S = 0.25


# Each a plan run with the machine to itself (support/plans.py): the window is the watcher's, and no other start
# may hold up its thread or the worker.
# The SIGKILL start switches on what keeps a phase through it (EXPORT_EACH_PHASE, off by default: issue 25); the
# SIGTERM start runs with the defaults, where the exit hook's flush keeps it.
plan("kill/sigkill-worker", alone=True)(
    lambda s: killed_start("sigkill-worker", signal.SIGKILL, 0.04, s.tiny_model, s.workdir, s.backends,
                           env={settings.EXPORT_EACH_PHASE.name: "true"}))
plan("kill/sigterm-worker", alone=True)(
    lambda s: killed_start("sigterm-worker", signal.SIGTERM, 0.0, s.tiny_model, s.workdir, s.backends))


def _stored(backends, st, local) -> set[tuple[str, str | None]]:
    ids = {s.trace_id for s in local}
    assert len(ids) == 1, ids
    expect = sum(1 for _ in local)
    spans = backends.trace_of_root(st.pid, expect=expect, timeout=30)
    return {(s.name, s.attrs.get(sc.PROCESS_KIND)) for s in spans}


def test_sigkill_of_the_worker_right_after_a_phase_keeps_that_phase(e2e, backends):
    st, local, phase, window = e2e.later("kill/sigkill-worker").result()
    # Nothing runs in a SIGKILLed process: the phase is kept because its export had already happened.
    assert phase is not None, f"{PHASE} lost: the worker was killed before it left the process"
    assert window is not None and 0 < window <= KILL_WINDOW_S, window
    names = {(s.name, s.attrs.get(sc.PROCESS_KIND)) for s in local}
    assert (sc.WORKER_PROCESS_SPAN, "worker") not in names  # the worker never ended its start: killed mid-start
    assert (PHASE, "worker") in _stored(backends, st, local)  # over OTLP too, not only in the local file


def test_sigkill_of_the_worker_mid_start_keeps_what_every_process_finished(e2e, backends):
    """The fault matrix's mid-start kill, on the same start: the phases every process had finished are in the trace
    store afterwards, and the root records the failure (the API server saw its engine die)."""
    st, local, _, _ = e2e.later("kill/sigkill-worker").result()
    spans = backends.trace_of_root(st.pid, expect=len(local), timeout=30)
    stored = {(s.name, s.attrs.get(sc.PROCESS_KIND)) for s in spans}
    for name, kind in ((PHASE, "worker"), (sc.IMPORTS_SPAN, "worker"), (sc.IMPORTS_SPAN, "engine_core"),
                       (sc.IMPORTS_SPAN, "api_server"), ("Config resolution", "api_server")):
        assert (name, kind) in stored, (name, kind)
    assert (sc.WORKER_PROCESS_SPAN, "worker") not in stored  # the worker never ended its start: killed mid-start
    roots = [s for s in spans if s.name == sc.ROOT_SPAN]
    assert len(roots) == 1 and roots[0].attrs[sc.OUTCOME] == "failed" and roots[0].status == 2, roots


def test_sigterm_of_the_worker_right_after_a_phase_keeps_that_phase_and_ends_its_start(e2e, backends):
    st, local, phase, window = e2e.later("kill/sigterm-worker").result()
    assert phase is not None, f"{PHASE} lost after SIGTERM"
    assert window is not None and 0 < window <= KILL_WINDOW_S, window
    # vLLM's handler raised SystemExit in the worker: our exit hook ended its start, and it was exported
    [worker] = [s for s in local if s.name == sc.WORKER_PROCESS_SPAN]
    assert worker.attrs[sc.OUTCOME] == "failed" and worker.attrs[sc.ERROR_TYPE] == "SystemExit", worker.attrs
    stored = _stored(backends, st, local)
    assert (PHASE, "worker") in stored and (sc.WORKER_PROCESS_SPAN, "worker") in stored
    [root] = [s for s in local if s.name == sc.ROOT_SPAN]
    assert root.attrs[sc.OUTCOME] == "failed"
