"""The startup resource sampler: a daemon thread per vLLM process, from process start until a short tail
after ready, then it stops.

Every tick of a thread of ours takes the GIL from vLLM's main thread while it works (each one a wait of that thread),
so the sampler ticks rarely while the process works (``SAMPLE_BUSY_MS``, every 5 s) and faster (``SAMPLE_HZ``, 2 Hz)
only while a waiting phase is open in it (its main thread idle on another process: a tick takes nothing from it). Its
readings are every process's own CPU time and resident memory, and in the API server also the whole process tree, the
host's cores, its cgroup's CPU throttling and, from the first process it starts on, the GPUs (NVML, loaded then).
Between ticks the span boundaries read the same (``snapshot``, on the thread that starts or ends the span): each
span's summary takes the exact deltas between its two snapshots, its cores peak from the readings inside it (ticks
and boundaries, each over at least 100 ms), its RSS peak from the kernel's high-water mark where that rose
inside it (exact), else from those readings. The same thread runs the start-in-progress refresh and the metrics
export while starting (``every``): one wake-up for all. The readings feed the resource metrics (otel_metrics.py).
"""

from __future__ import annotations

import bisect
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # not on every platform
    resource = None  # type: ignore[assignment]

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation import threads
from vllm_otel_startup.agent.foundation.guard import SAMPLER, failed
from vllm_otel_startup.agent.resources import gpu
from vllm_otel_startup.agent.resources.procfs import (
    ProcFiles,
    cgroup_throttled_s,
    children,
    cpu_model,
    io_bytes,
    proc_cpu_s,
    read_file,
    rss_bytes,
    system_cores,
)
from vllm_otel_startup.agent.resources.snapshot import Snapshot, summarize

_log = logging.getLogger("vllm_otel_startup")
MAX_SAMPLES = 36_000  # one hour of readings 100 ms apart
# a reading covers at least this (a span boundary closer to the last reading is folded into the next): a cores peak
# over a few microseconds would say nothing
MIN_INTERVAL_NS = 100_000_000
# the process tree's CPU every 5th tick: one /proc read per descendant (with Inductor's compile workers, tens of them
# on a GPU host): a read that grows with the tree, so it is taken less often
TREE_EVERY = 5
# every 5th discovery reads every thread's children file; the others skip the threads found childless (a process's
# main thread, which is where vLLM starts its processes, and threads not seen before are always read): an EngineCore
# of a GPU start has ~100 threads, read once a second while the API server waits on it
FULL_DISCOVERY_EVERY = 5


def _hz() -> float:
    return settings.number(settings.SAMPLE_HZ)


class Sampler:
    def __init__(self, host: bool) -> None:
        self.host = host  # API server: also the process tree, host cores, cgroup and GPUs
        self.pid = os.getpid()
        self.hz = _hz()
        self.busy_s = settings.seconds_from_ms(settings.SAMPLE_BUSY_MS)  # the interval while no waiting phase is open
        self.gap_ns = MIN_INTERVAL_NS if self.hz > 0 else 0  # the shortest interval one reading covers
        self.waiting = 0  # waiting phases open in this process (waiting_changed): fast ticks while > 0
        gpu_hz = settings.number(settings.GPU_SAMPLE_HZ)
        self.gpu_every = max(1, round(self.hz / gpu_hz)) if gpu_hz > 0 and self.hz > 0 else 0  # 0: no NVML readings
        self.nvml: Any = None
        self.device_model: str | None = None
        # series for peaks: sample times (wall ns), process cores used over the interval ending there, RSS
        self.times: list[int] = []
        self.cores: list[float] = []
        self.rss: list[int] = []
        self.sys_busy_peak: int | None = None  # most host cores > 50 % busy in one interval (API server)
        self.tree_cpu: float | None = None
        self._tree_t = 0
        self.gpu: list[tuple[dict[str, str], dict[str, float]]] = []
        self.pcie: dict[str, list[float]] = {}  # hw.id -> [rx, tx] bytes since the sampler began (NVML counters)
        self._pcie0: dict[str, tuple[int, int]] = {}
        self.throttled0 = cgroup_throttled_s() if host else None
        self.peaks: dict[str, float] = {}  # cpu scope -> peak cores since the metric reader last took it
        self.stopped = False
        self._stop_at: float | None = None
        self._on_stop: Callable[[], None] | None = None
        self._tree: set[int] = set()
        self._discoveries = 0
        self._childless: set[str] = set()  # children files found empty, skipped until the next full discovery
        self.gpu_memory_source = gpu.ProcessGpuMemory(self.pid)  # fixed when this process's CUDA context is seen
        self._files = ProcFiles()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()  # ends a tick's wait early: a waiting phase began, a stop
        self._lock = threading.RLock()  # the series and peaks: the sampler thread and span boundaries both write
        self._last = (time.time_ns(), time.process_time_ns())  # the last reading in the series (wall, CPU ns)
        self._rss_since = 0  # the most RSS read since that reading (a reading too close to it is folded in)
        self._jobs: list[list[Any]] = []  # [every s, next due (monotonic), job, every s while busy] (every)
        self._deferred = False  # no thread while this process imports (start(importing=True) until imports_over)
        self._launch_at: float | None = None  # imports over, no thread yet: it starts at the first wait, or then
        self._replan = False  # a wake-up only to wait for a new time (stop_after), not a tick
        self._nvml_due = False  # API server with a GPU driver: NVML is loaded once it has a descendant
        self.ticks = 0  # ticks so far (the self-cost line)
        self.spent: dict[str, int] = {}  # this thread's CPU ns per part of a tick (the self-cost line, self_cost.py)

    # ---- lifecycle ------------------------------------------------------------------------------------
    def start(self, importing: bool = False) -> None:
        """The sampler thread; ``importing``: not before :meth:`imports_over`. A thread of ours beside a process's
        imports takes the GIL from them at its start and at every tick, and a refresh or an export there makes its
        first lazy imports and encodings compete with them: more waits of the main thread before its first log line
        (docs/lab/overhead.md). Until then the span boundaries take the readings."""
        if self.hz <= 0:
            self.stopped = True
            return
        self._deferred = importing
        if not importing:
            self._launch()

    def _launch(self, reset: bool = True) -> None:
        if reset:
            self._last = (time.time_ns(), time.process_time_ns())
        self._thread = threads.Thread(target=self._run, name="vllm-otel-startup-sampler", daemon=True)
        self._thread.start()

    def imports_over(self) -> None:
        """This process's imports are over (its first segment closed): the jobs run an interval from now (their pace
        while the process works), not at once beside the main thread's next steps. The API server's thread starts
        when its main thread first waits (on its engine, moments later: a thread's start hands the GIL back and forth
        with the thread that starts it), else at its first span boundary a busy interval from now, or at the ready
        point for the tail; its span boundaries take the readings until then. A child's starts now: a long phase
        (a weight load) may have no boundary for minutes, and its in-progress refresh runs on this thread."""
        deferred, self._deferred = self._deferred, False
        if not deferred or self.stopping:
            return
        now = time.monotonic()
        for job in self._jobs:
            job[1] = now + self._pace(job)
        if not self.host or self.waiting > 0 or self.busy_s <= 0:
            self._launch()
        else:
            self._launch_at = now + self._interval()

    def _launch_pending(self, now: float | None = None) -> None:
        """Start the thread whose start waits (imports_over), if it is due (``now`` past its time; None: at once)."""
        at = self._launch_at
        if at is None or (now is not None and now < at):
            return
        with self._lock:
            if self._launch_at is None:
                return
            self._launch_at = None
            self._launch(reset=False)  # the readings go on from the span boundaries' last one

    def waiting_changed(self, delta: int) -> None:
        """A waiting phase of this process began (+1) or ended (-1): fast ticks while one is open (its main thread
        idles on another process), from now on. When the last one ends the main thread works again (the API server
        builds its app once its engine answered): the next tick and each job come a busy interval from now, not the
        fast tick already due beside its next steps (each tick there takes the GIL from it: docs/lab/overhead.md)."""
        self.waiting += delta
        now = time.monotonic()
        if delta > 0 and self.waiting == 1:
            for job in self._jobs:  # a job slowed while the process worked: its own interval from now
                job[1] = min(job[1], now + job[0])
            self._launch_pending()
            self._wake.set()
        elif delta < 0 and self.waiting == 0 and self.busy_s > 0:
            for job in self._jobs:
                job[1] = max(job[1], now + self._pace(job))
            self._replan = True  # woken to wait for the busy interval: no tick now
            self._wake.set()

    def every(self, seconds: float, job: Callable[[], None], busy_s: float = 0.0) -> bool:
        """Run ``job`` on the sampler thread every ``seconds`` while it samples (one wake-up for a tick and the job),
        every ``busy_s`` while no waiting phase is open if that is longer; False where the sampler does not run
        (switched off): the caller runs it another way."""
        if self.hz <= 0 or self.stopped or seconds <= 0:
            return False
        self._jobs.append([seconds, time.monotonic() + max(seconds, busy_s), job, busy_s])
        return True

    def stop_after(self, tail_s: float, on_stop: Callable[[], None] | None = None) -> None:
        """Keep sampling ``tail_s`` more seconds, then take a last sample, call ``on_stop`` and end."""
        self._on_stop = on_stop
        self._stop_at = time.monotonic() + tail_s
        self._replan = True  # woken to wait for the stop time: no tick now, beside the ready point's main thread
        self._launch_pending()  # a start that was ready before its thread's time: the tail still samples
        self._wake.set()
        if self._thread is None or not self._thread.is_alive():
            self._finish()

    @property
    def stopping(self) -> bool:
        """Stopped, or told when to stop (stop_after)."""
        return self.stopped or self._stop_at is not None

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop_now(self, timeout: float) -> None:
        """Stop (unless already told when to) and wait at most ``timeout`` for the thread: its last sample is taken
        within one tick."""
        if not self.stopping:
            self.stop_after(0)
        self.join(timeout)

    def _finish(self) -> None:
        on_stop, self._on_stop = self._on_stop, None
        if on_stop is not None:
            try:
                on_stop()
            except Exception:  # noqa: BLE001
                _log.debug("sampler stop hook failed", exc_info=True)
        self.stopped = True

    def _interval(self) -> float:
        fast = 1.0 / self.hz
        return fast if self.waiting > 0 or self.busy_s <= 0 else max(self.busy_s, fast)

    def _run(self) -> None:
        try:
            self._setup()
            stride = max(1, (os.cpu_count() or 1) // 16)  # /proc/stat grows with the core count
            prev_sys = system_cores(self._files) if self.host else None
            while True:
                now = time.monotonic()
                due = min([now + self._interval(), *(job[1] for job in self._jobs),
                           *((self._stop_at,) if self._stop_at is not None else ())])
                woken = self._wake.wait(max(0.0, due - now))
                self._wake.clear()
                if woken and self._replan:
                    self._replan = False
                    continue
                self.ticks += 1
                prev_sys = self._sample(self.ticks, stride, prev_sys, every=self.waiting <= 0)
                t0 = time.thread_time_ns()
                self._run_jobs()
                self._spent("jobs", t0)
                if self._stop_at is not None and time.monotonic() >= self._stop_at:
                    break
        except Exception:  # noqa: BLE001 - the sampler never hurts the host
            failed(SAMPLER, "the resource sampler stopped")
        self._files.close()
        self._finish()

    def _run_jobs(self) -> None:
        now = time.monotonic()
        for job in self._jobs:
            if job[1] <= now:
                job[1] = now + self._pace(job)
                try:
                    job[2]()
                except Exception:  # noqa: BLE001 - a job (the in-progress refresh) is best effort
                    _log.debug("sampler job failed", exc_info=True)

    def _pace(self, job: list[Any]) -> float:  # a job's interval now: its own while a waiting phase is open
        return job[0] if self.waiting > 0 else max(job[0], job[3])

    def _setup(self) -> None:
        # No process loads NVML while it imports. The API server loads it once it has a descendant (_load_nvml:
        # its GPU readings begin there, and it then waits on that process); an EngineCore or worker once its own
        # CUDA context exists (_fix_gpu_source): NVML initialised by a child while it imports vLLM and torch
        # made those imports seconds slower (docs/lab/overhead-gpu.md).
        self._nvml_due = self.host and gpu.driver_present()
        self.device_model = cpu_model()

    def _load_nvml(self) -> None:
        self._nvml_due = False
        self.nvml = gpu.Nvml()
        self.device_model = self.nvml.model or self.device_model

    @staticmethod
    def _cuda_context() -> bool:
        """Does this process hold a CUDA context? Never creates one; False while torch.cuda is still being
        imported (the module is in sys.modules half made: this thread must not fail on it, or sampling stops)."""
        cuda = sys.modules.get("torch.cuda")
        is_initialized = getattr(cuda, "is_initialized", None)
        try:
            return bool(is_initialized()) if callable(is_initialized) else False
        except Exception:  # noqa: BLE001
            return False

    def _fix_gpu_source(self) -> None:
        """A child's CUDA context exists: load its NVML (on this thread; not in a PID namespace, where NVML cannot
        see the process) and fix its GPU-memory source."""
        try:
            if self.nvml is None and gpu.child_may_load_nvml():
                self.nvml = gpu.Nvml()
        finally:
            self.gpu_memory_source.fix(self.nvml)

    def _sample(self, tick: int, stride: int, prev_sys: Any, every: bool = False) -> Any:
        """One tick; ``every``: the readings taken every n-th tick at the fast rate are taken on this one too."""
        t0 = time.thread_time_ns()
        self.note(time.time_ns(), time.process_time_ns(), rss_bytes(self._files) or 0)
        t0 = self._spent("process", t0)
        if not self.host and self.gpu_memory_source.source is None and self._cuda_context():
            self._fix_gpu_source()
            t0 = self._spent("nvml", t0)
        if self.host:
            if every or tick % stride == 0:
                cur = system_cores(self._files)
                if cur and prev_sys and len(cur) == len(prev_sys):
                    busy = sum(1 for (b1, t1), (b0, t0) in zip(cur, prev_sys, strict=True)
                               if t1 > t0 and (b1 - b0) / (t1 - t0) > 0.5)
                    self.sys_busy_peak = max(busy, self.sys_busy_peak or 0)
                    self._peak("system", busy)
                prev_sys = cur
                t0 = self._spent("host", t0)
            if every or tick % max(1, round(self.hz)) == 1:  # new descendants (EngineCore, workers...) once a second
                self._discover(self._files)
                t0 = self._spent("discover", t0)
                if self._nvml_due and self._tree:
                    self._load_nvml()
                    t0 = self._spent("nvml", t0)
            if every or tick % TREE_EVERY == 1:
                tree = sum(v for v in (proc_cpu_s(p, self._files) for p in [self.pid, *self._tree]) if v is not None)
                now = time.time_ns()
                if self.tree_cpu is not None:
                    self._peak("tree", (tree - self.tree_cpu) / max((now - self._tree_t) / 1e9, 1e-9))
                self.tree_cpu, self._tree_t = tree, now
                t0 = self._spent("tree", t0)
            # the GPUs from the first process this one starts on: before it the start is this interpreter importing
            # (nothing on a GPU), and each NVML call hands the GIL to that import
            if self.nvml is not None and self.nvml.ok and self.gpu_every and self._tree \
                    and (every or tick % self.gpu_every == 0):
                self._gpu()
                self._spent("nvml", t0)
        return prev_sys

    def _spent(self, part: str, t0: int) -> int:
        """Add this thread's CPU since ``t0`` to ``part``; the reading, for the next part."""
        t = time.thread_time_ns()
        self.spent[part] = self.spent.get(part, 0) + t - t0
        return t

    def note(self, t: int, cpu_ns: int, rss: int) -> None:
        """A reading (a tick, or a span boundary's snapshot) into the series: the cores used since the last reading,
        once at least MIN_INTERVAL_NS has passed (a closer one is folded into the next)."""
        with self._lock:
            t0, c0 = self._last
            self._rss_since = max(self._rss_since, rss)
            if t - t0 < self.gap_ns or t <= t0:
                return
            cores = (cpu_ns - c0) / (t - t0)
            self._last = (t, cpu_ns)
            self.times.append(t)
            self.cores.append(cores)
            self.rss.append(self._rss_since)
            self._rss_since = 0
            self._peak("process", cores)
            if len(self.times) > MAX_SAMPLES:
                del self.times[0], self.cores[0], self.rss[0]

    def _peak(self, scope: str, value: float) -> None:
        with self._lock:
            if value > self.peaks.get(scope, -1.0):
                self.peaks[scope] = value

    def _discover(self, files: ProcFiles | None = None) -> None:
        """The process tree below this process. ``files`` (the sampler thread's): this process's threads' children
        files are kept open, read once a second while this process imports on the start's critical path; the other
        processes' (an EngineCore of a hundred threads) read with the GIL held: three hand-overs each otherwise,
        when the API server's main thread works again after its handshake (docs/lab/overhead.md). Between full
        discoveries (FULL_DISCOVERY_EVERY) the threads found childless are skipped; without ``files`` (the root
        span's summary) every one is read."""
        self._discoveries += 1
        full = files is None or self._discoveries % FULL_DISCOVERY_EVERY == 1
        seen, todo, used, empty = set(), [self.pid], set(), set()
        while todo:
            pid = todo.pop()
            read = read_file if files is None else files if pid == self.pid else files.once
            for c in children(pid, read, used, None if full else self._childless, empty):
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        self._childless = empty if full else self._childless | empty
        for gone in self._tree - seen:  # a pid may be reused: never keep reading an old process's file
            self._files.forget(f"/proc/{gone}/stat")
        if files is not None:
            files.forget_unused(f"/proc/{self.pid}/task/", used)
        self._tree = seen

    def _gpu(self) -> None:
        readings = self.nvml.device_readings()
        for ident, r in readings:  # PCIe bytes: the driver's cumulative counters, from the first reading on
            if "pcie_rx" in r and "pcie_tx" in r:
                rx0, tx0 = self._pcie0.setdefault(ident["hw.id"], (int(r["pcie_rx"]), int(r["pcie_tx"])))
                self.pcie[ident["hw.id"]] = [float(r["pcie_rx"] - rx0), float(r["pcie_tx"] - tx0)]
        self.gpu = readings

    def take_peaks(self) -> dict[str, float]:
        """Peak cores per scope since the last call (the metric reader's export interval)."""
        with self._lock:
            peaks, self.peaks = self.peaks, {}
        return peaks

    # ---- per-span summary ---------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        io = io_bytes()  # /proc/self/io: reaped subprocesses' reads are added to it by the kernel
        held, src = self.gpu_memory()
        ch = resource.getrusage(resource.RUSAGE_CHILDREN) if resource is not None else None
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 if resource is not None else None
        t, cpu, rss = time.time_ns(), time.process_time_ns(), rss_bytes()
        if self.gap_ns:  # a reading between the sampler's ticks
            self.note(t, cpu, rss or 0)
        if self._launch_at is not None:
            self._launch_pending(time.monotonic())
        return Snapshot(t, cpu, io[0] if io else None, held, src, ch.ru_utime + ch.ru_stime if ch else 0.0,
                        ch.ru_maxrss * 1024 if ch else 0, rss, hwm)

    def gpu_memory(self) -> tuple[int | None, str | None]:
        """GPU memory held by this process and its source (gpu.ProcessGpuMemory: one source per process).
        Only the process that owns a context is asked: never the API server (torch.cuda is not touched there),
        and never a process whose torch.cuda is not initialised (asking would create a context)."""
        if self.host or not self._cuda_context():
            return None, None
        sampling = not self.stopping and (self._deferred or (self._thread is not None and self._thread.is_alive()))
        return self.gpu_memory_source.reading(self.nvml, sampling)

    def summary(self, a: Snapshot, b: Snapshot) -> dict[str, Any]:
        """Resource attributes of the interval between two snapshots, its peaks from the readings inside it."""
        with self._lock:
            i, j = bisect.bisect_right(self.times, a.t), bisect.bisect_right(self.times, b.t)
            cores, rss = self.cores[i:j], self.rss[i:j]
        return summarize(a, b, cores, rss)

    def host_summary(self) -> dict[str, Any]:
        """Root-only attributes, from process creation until now: the whole tree's CPU, the busiest host
        interval, cgroup throttling."""
        self._discover()
        tree = sum(v for v in (proc_cpu_s(p) for p in [self.pid, *self._tree]) if v is not None)
        attrs: dict[str, Any] = {sc.RES_TREE_CPU_TIME: round(tree, 3)}
        if self.sys_busy_peak is not None:
            attrs[sc.RES_SYSTEM_CORES_BUSY_PEAK] = self.sys_busy_peak
        throttled = cgroup_throttled_s()
        if throttled is not None and self.throttled0 is not None:
            attrs[sc.RES_CGROUP_THROTTLED] = round(throttled - self.throttled0, 4)
        return attrs
