"""Spans for work that no function of vLLM names, found by watching the interpreter: long garbage
collections ("Garbage collection", from ``gc.callbacks``) and slow module imports inside a phase ("Module
import", from importlib's ``_find_and_load``).

vLLM calls ``gc.collect()`` itself (twice at the end of every model load, long with torch's heap) and
imports heavy modules lazily inside its phases (a model runner, FlashInfer, the weight loaders); without a span
that time is a parent's unexplained self time. The watchers only record (a contextvar read and a dict append:
no lock is taken inside a collection or an import, which may run while the SDK holds its own locks); the spans
are made when the span that was current at the time ends, as its children. A collection with no phase span current
(between phases, in our span processor as a phase begins, or triggered by another thread: it holds the GIL, so the
main thread stops too) becomes a child of the process span when the process's startup ends, less what a bootstrap
segment already names (a gen-2 collection there had been an unexplained gap, e.g. between "EngineCoreProc
init" and its first child). Imports outside any phase span are not recorded. So the watchers
start with a process's first phase (runtime.Runtime.close_segment): while it imports, before that, they would see
thousands of imports and collections and record none.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from typing import Any

from opentelemetry import trace

from vllm_otel_startup import diagnostics
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import sysmon, threads
from vllm_otel_startup.agent.foundation.guard import SPANS, failed
from vllm_otel_startup.agent.foundation.patch_points import SEGMENT_SPANS, SPAN_PHASES
from vllm_otel_startup.model.intervals import merge, minus

GC_MIN_NS = 10_000_000  # shorter collections are noise at startup scale
IMPORT_MIN_NS = 20_000_000  # an import that takes longer is worth a line of its own
_DUE = threading.Lock()
MAX_LOOSE = 200  # collections kept for the process span: a bound, never reached at startup scale


# The import watcher is compiled as part of importlib: CPython strips importlib's frames from import tracebacks
# (remove_importlib_frames), so an ImportError that an optional import raises, and vLLM or a library logs, still
# ends in the importer's frame, never in ours (a frame of our own there made every such traceback look like
# this package's fault).
# A module already loaded returns at once, with no call of ours deeper than the frame it replaces: importlib's
# ``import_module`` runs this for every call (vLLM's capture calls it a few times per CUDA graph, through
# ``unittest.mock.patch``), and a frame one level deeper can land on a boundary of CPython's data-stack chunks (a chunk
# mapped and unmapped per call: cpython#142183).
_WATCHER = """
def _find_and_load(name, import_):
    module = _sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module
    token = _enter()
    ok = False
    try:
        module = _original(name, import_)
        ok = True
        return module
    finally:
        _exit(name, token, ok)
"""


def hand_back(exc_type: type[BaseException]) -> None:
    """Re-raise in the main thread, once the collection is over, what a signal handler raised inside our gc
    callback. Python runs a pending signal's handler at the next bytecode boundary of the main thread, which can
    be inside a ``gc`` callback (its very first one: the callback's entry, before any ``try`` of ours); Python
    ignores whatever a callback raises (it goes to ``sys.unraisablehook``), so vLLM's one-shot SIGTERM handler
    (``raise SystemExit``) was lost there and the process went on starting. A helper thread sets the same
    exception type on the main thread (``PyThreadState_SetAsyncExc``) at a moment the main thread, waiting for the
    GIL, is in none of ours (not in a gc callback again): it raises it there as it takes the GIL back, as the
    handler's raise would have (the type, not the instance: vLLM raises a bare ``SystemExit()``). Should it still
    land in our callback, it is caught and handed back again. At interpreter shutdown (no new thread there) nothing
    is handed back: the process is leaving already, as the handler's raise would have made it."""
    tid = threading.get_ident()
    left = threading.Event()  # the hook is done: raising before would land in it, and be ignored there too

    def deliver() -> None:
        import ctypes

        left.wait(1.0)
        # This thread runs when the main thread lets go of the GIL, and it does so at its next check: often the very
        # entry of a gc callback, right after a collection. Raised there, the exception is ignored once more (in a
        # loop that allocates and calls nothing, every time: tests/unit/behaviour/test_gc_signal.py). So it is set
        # only while the main thread is somewhere else: it raises it there, as it takes the GIL back.
        deadline = time.monotonic() + 2.0
        while True:
            time.sleep(0.0005)
            if not _inside(sys._current_frames().get(tid), _HANDING) or time.monotonic() > deadline:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc_type))
                return

    try:
        threads.start(threads.Thread(target=deliver, name="vllm-otel-startup-signal", daemon=True))
    finally:
        left.set()


def restart(previous: RetroSpans | None, tracer: Any, process_span: Any, importing: bool) -> RetroSpans | None:
    """This process's watchers, from its process span's start (a forked child inherits its parent's: those stop
    first); ``importing``: installed with the first phase (close_segment). None where switched off."""
    if previous is not None:
        previous.uninstall()
    if diagnostics.off("watchers"):  # diagnostics.OFF
        return None
    retro = RetroSpans(tracer, skip_span_id=process_span.get_span_context().span_id)
    retro.install(later=importing)
    return retro


def _inside(frame: Any, codes: tuple[Any, ...]) -> bool:
    """Whether one of ``codes`` runs in ``frame`` or any frame under it."""
    while frame is not None:
        if any(frame.f_code is c for c in codes):
            return True
        frame = frame.f_back
    return False


def _import_wrapper(original: Any, enter: Any, exit_: Any) -> Any:
    namespace: dict[str, Any] = {"_original": original, "_enter": enter, "_exit": exit_, "_sys": sys}
    exec(compile(_WATCHER, "<frozen importlib._bootstrap>", "exec"), namespace)  # noqa: S102 - our own constant
    return namespace["_find_and_load"]


class _FramelessImports:
    """The import watcher on Python >= 3.12 (sysmon.py): the start and return of importlib's own
    ``_find_and_load_unlocked`` (``sysmon.import_code``: a module not loaded yet), seen through ``sys.monitoring``.
    Replacing ``_find_and_load`` put a frame of ours under every module being loaded, nested imports one more each:
    a page fault wherever that landed on a data-stack chunk boundary (cpython#142183).
    Per thread, the frames of the imports in progress: a nested import's start walks its callers only up to the
    innermost of them (a few frames: the enclosing module's execution), its return is one comparison with the last.
    An import that fails reports no return: the next import of its thread finds it no longer among its callers and
    drops it."""

    def __init__(self, retro: RetroSpans) -> None:
        self.retro = retro
        self._stacks: dict[int, list[Any]] = {}  # thread -> frames of its imports in progress, the outermost first
        self._t0: dict[int, int] = {}  # thread -> start of its outermost import in progress

    def started(self, code: Any, frame: Any) -> None:
        self.retro.imports += 1
        tid = threading.get_ident()
        stack = self._stacks.get(tid)
        if stack:
            top, f = stack[-1], frame.f_back
            while f is not None and f is not top:
                f = f.f_back
            if f is None:  # the innermost one is not among our callers: it failed
                _drop_unwound(stack, frame)
        if not stack:
            stack = self._stacks[tid] = []
            self._t0[tid] = time.time_ns()
        stack.append(frame)

    def returned(self, code: Any, frame: Any, result: Any) -> None:
        tid = threading.get_ident()
        stack = self._stacks.get(tid)
        if not stack:
            return  # one begun before we watched
        if stack[-1] is frame:
            stack.pop()
        elif any(f is frame for f in stack):  # the ones above it failed
            while stack.pop() is not frame:
                pass
        else:
            return
        if not stack:  # the outermost import: nested ones are part of it
            del self._stacks[tid]
            self.retro.imported(frame.f_locals.get("name") or getattr(result, "__name__", "?"), self._t0.pop(tid))

    def unwound(self, code: Any, exc: BaseException) -> None:
        return None  # (PY_UNWIND is on only while a patch point runs) a failed import is found at the next one


def _drop_unwound(stack: list[Any], frame: Any) -> None:
    """Drop the imports of ``stack`` no longer among ``frame``'s callers (they failed); the whole stack walked once."""
    callers, f = set(), frame.f_back
    while f is not None:
        callers.add(id(f))
        f = f.f_back
    while stack and id(stack[-1]) not in callers:  # we hold the frames we compare: their ids are not reused
        stack.pop()


class RetroSpans:
    def __init__(self, tracer: trace.Tracer, skip_span_id: int | None = None) -> None:
        self.tracer = tracer
        self.skip = skip_span_id  # the process span: work directly under it is not a phase's
        self._found: dict[int, list[tuple[str, int, int, dict[str, Any]]]] = {}  # span id -> spans to make
        self._loose: list[tuple[int, int, dict[str, Any], int | None]] = []  # no phase span current: emit_loose
        self._gc_start: tuple[int, int] | None = None  # (start, thread ident)
        self._depth: dict[int, int] = {}  # thread -> nesting of imports in progress
        self._bootstrap: Any = None
        self._find_and_load: Any = None
        self._wrapper: Any = None
        self._previous_hook: Any = None  # sys.unraisablehook before ours
        self._frameless: _FramelessImports | None = None  # Python >= 3.12: the import watcher through sys.monitoring
        self._due = False  # install() was asked for later: install_due() installs
        self.gc_calls = 0  # collections seen, imports watched (self_cost.py)
        self.imports = 0

    # ---- install / uninstall ------------------------------------------------------------------------
    def install(self, later: bool = False) -> None:
        """Start watching; ``later``: at ``install_due()`` (a process's first phase: its imports are over)."""
        self._due = later
        if not later:
            self._install()

    def install_due(self) -> None:
        if self._due:  # a flag read: every later phase ends here
            with _DUE:  # two threads beginning phases at once install once, and never after uninstall()
                if self._due:
                    self._due = False
                    self._install()

    def _install(self) -> None:
        gc.callbacks.append(self._gc)
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        with contextlib.suppress(Exception):
            import importlib._bootstrap as bootstrap  # the C import machinery looks this up at every import

            if sysmon.available():  # Python >= 3.12: importlib's own function, watched; no frame of ours
                watcher = _FramelessImports(self)
                try:
                    watched = sysmon.events().watch(sysmon.import_code(), watcher)
                except Exception:  # noqa: BLE001 - then the wrapper below
                    failed(SPANS, "the import watcher (sys.monitoring)")
                    watched = False
                if watched:
                    self._frameless = watcher
                    return
            self._bootstrap, self._find_and_load = bootstrap, bootstrap._find_and_load
            self._wrapper = _import_wrapper(bootstrap._find_and_load, self._enter, self._exit)
            bootstrap._find_and_load = self._wrapper

    def finish(self, process_span: Any, local: list[tuple[Any, ...]], last: tuple[str, int] | None, end_ns: int,
               kind: str) -> None:
        """The process's startup ended at ``end_ns``: stop watching, and make the collections that ran under no phase
        span under the process span, outside its bootstrap segments (``local``: the ledger's ended spans; ``last``:
        the segment open until now)."""
        named = [(s, e) for s, e, name, *_ in local if name in SEGMENT_SPANS]
        if last is not None:
            named.append((last[1], end_ns))
        self.uninstall(emit_loose_under=process_span, named=named,
                       tags={sc.PHASE: SPAN_PHASES[sc.GC_SPAN], sc.PROCESS_KIND: kind})

    def uninstall(self, emit_loose_under: Any = None, named: list[tuple[int, int]] | None = None,
                  tags: dict[str, Any] | None = None) -> None:
        """Stop watching; with ``emit_loose_under`` (the process span, at the end of its startup) first make the
        collections that ran under no phase span (emit_loose)."""
        with _DUE:
            self._due = False
        if emit_loose_under is not None:
            self.emit_loose(emit_loose_under, named or [], tags or {})
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._gc)
        if self._previous_hook is not None and sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._previous_hook
        self._previous_hook = None
        if self._frameless is not None:
            with contextlib.suppress(Exception):
                sysmon.events().unwatch(sysmon.import_code(), self._frameless)
            self._frameless = None
        b = self._bootstrap
        if b is not None and getattr(b, "_find_and_load", None) is self._wrapper:
            b._find_and_load = self._find_and_load
        self._bootstrap = None
        self._found.clear()
        self._loose.clear()

    # ---- watchers -------------------------------------------------------------------------------------
    def _record(self, span: Any, name: str, t0: int, t1: int, attrs: dict[str, Any]) -> None:
        ctx = span.get_span_context()
        if ctx.span_id != self.skip and span.is_recording():
            # dict.setdefault and list.append are atomic under the GIL: no lock needed here
            self._found.setdefault(ctx.span_id, []).append((name, t0, t1, attrs))

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        try:
            if phase == "start":
                self.gc_calls += 1
                # the thread's ident, never threading.current_thread(): for a thread that threading did not start
                # it makes a _DummyThread under threading's own lock, which that thread may hold right now
                self._gc_start = (time.time_ns(), threading.get_ident())
                return
            started, self._gc_start = self._gc_start, None
            if started is None:
                return
            t0, ident = started
            t1 = time.time_ns()
            if t1 - t0 < GC_MIN_NS:
                return
            # a collection runs on the thread it began on, in the context it began in: its span is read only for
            # the few long enough to record (most last microseconds)
            span = trace.get_current_span()
            main = ident == threading.main_thread().ident
            attrs: dict[str, Any] = {sc.GC_GENERATION: int(info.get("generation", -1)),
                                     sc.GC_COLLECTED: int(info.get("collected", 0))}
            ctx = span.get_span_context()
            if ctx.span_id != self.skip and span.is_recording() and main:
                self._record(span, sc.GC_SPAN, t0, t1, attrs)
            elif self.skip is not None and len(self._loose) < MAX_LOOSE:
                # the thread's name is looked up when the span is made, outside the collection
                self._loose.append((t0, t1, attrs, None if main else ident))  # atomic under the GIL
        except Exception:  # noqa: BLE001 - never raise inside a collection
            failed(SPANS, "the garbage-collection watcher")

    def _unraisable(self, unraisable: Any) -> None:
        """What our gc callback raised: a signal handler's exception (SystemExit, KeyboardInterrupt) goes back to
        the main thread (hand_back); anything else, and everything not ours, to the hook that was there."""
        if unraisable.object == self._gc and not issubclass(unraisable.exc_type, Exception):
            hand_back(unraisable.exc_type)
            return
        (self._previous_hook or sys.__unraisablehook__)(unraisable)

    # every import of the process runs through these two: nothing may escape them into the import
    def _enter(self) -> tuple[int, int, int] | None:
        try:
            self.imports += 1
            tid = threading.get_ident()
            depth = self._depth.get(tid, 0)
            self._depth[tid] = depth + 1
            return tid, depth, time.time_ns()
        except Exception:  # noqa: BLE001
            failed(SPANS, "the import watcher")
            return None

    def _exit(self, name: str, token: tuple[int, int, int] | None, ok: bool) -> None:
        try:
            if token is None:
                return
            tid, depth, t0 = token
            self._depth[tid] = depth
            if ok and depth == 0:  # the outermost import: nested ones are part of it
                self.imported(name, t0)
        except Exception:  # noqa: BLE001
            failed(SPANS, "the import watcher")

    def imported(self, name: str, t0: int) -> None:
        """An outermost import that returned, begun at ``t0``: a span of the current one if it took long enough."""
        t1 = time.time_ns()
        if t1 - t0 >= IMPORT_MIN_NS:
            self._record(trace.get_current_span(), sc.IMPORT_SPAN, t0, t1, {sc.IMPORT_MODULE: name})

    # ---- emission -------------------------------------------------------------------------------------
    def emit_loose(self, process_span: Any, named: list[tuple[int, int]], tags: dict[str, Any]) -> None:
        """Make the collections that ran under no phase span, as children of ``process_span``: the part of each
        outside the ``named`` intervals (the bootstrap segments, which already name that time), if it is long
        enough to matter (called as this process's startup ends, once our span processor no longer tags spans:
        ``tags`` are its phase and process-kind attributes)."""
        loose, self._loose = self._loose, []
        ctx = trace.set_span_in_context(process_span)
        segments = merge(named)
        names = {t.ident: t.name for t in threading.enumerate()} if any(x[3] for x in loose) else {}
        for t0, t1, attrs, ident in loose:
            if ident is not None:
                attrs = {**attrs, sc.THREAD_NAME: names.get(ident, f"thread {ident}")}
            left = minus([(t0, t1)], segments)
            if left and left[-1][1] - left[0][0] >= GC_MIN_NS:  # from the first uncovered instant to the last
                self.tracer.start_span(sc.GC_SPAN, context=ctx, start_time=left[0][0],
                                       attributes={**attrs, **tags}).end(end_time=left[-1][1])

    def emit_children(self, parent: Any) -> None:
        """Make the spans of what ran under ``parent`` (called as ``parent`` ends)."""
        found = self._found.pop(parent.get_span_context().span_id, None)
        if not found:
            return
        ctx = trace.set_span_in_context(parent)
        for name, t0, t1, attrs in found:
            self.tracer.start_span(name, context=ctx, start_time=t0, attributes=attrs).end(end_time=t1)


# where a handed-back exception must not be raised: our gc callback, our unraisable hook, the hand-back itself
_HANDING = (RetroSpans._gc.__code__, RetroSpans._unraisable.__code__, hand_back.__code__)
