"""Frameless patch points (Python >= 3.12): a span, ready, guard or enrich row on a plain function is traced through
``sys.monitoring``: the same spans, effects and probe arguments as its wrapper gives, and no frame of ours on vLLM's
stack while vLLM's function runs (issue 25). Everything else, and older interpreters, keep the wrapper.

Run by the unit tier on the project's interpreter (3.11: only the fallback tests) and by `tests/run.sh` under a
CPython 3.12 (support/python312.sh), where the monitored path runs."""

from __future__ import annotations

import importlib
import pickle
import sys
import threading
import traceback

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import sysmon
from vllm_otel_startup.agent.foundation.patch_points import PatchPoint
from vllm_otel_startup.agent.patching import frameless
from vllm_otel_startup.agent.patching.hooks import Installer

monitoring = pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring: Python >= 3.12")
PACKAGE_DIR = frameless.__file__.rsplit("/agent/", 1)[0]

TARGET_PY = '''
import functools, sys, time

SEEN = []

def our_frames():
    """Frames of vllm_otel_startup on the stack right now (the test's own frames are not in the package)."""
    f, out = sys._getframe(1), []
    while f is not None:
        if "/vllm_otel_startup/" in f.f_code.co_filename:
            out.append(f.f_code.co_qualname)
        f = f.f_back
    return out

class Runner:
    def capture(self, sizes, mode="FULL", *extra, warmup=1, **options):
        SEEN.append(our_frames())
        time.sleep(0.002)
        return ("captured", sizes, mode)

    def fail(self):
        SEEN.append(our_frames())
        raise RuntimeError("vLLM's own failure")

    def outer(self):
        SEEN.append(our_frames())
        return self.capture([1])

    @staticmethod
    def static(x):
        return x + 1

def loop(n):
    return n if n <= 0 else loop(n - 1)

def exits():
    raise SystemExit(3)

def deco(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner

@deco
def decorated(x):
    SEEN.append(our_frames())
    return x * 2

@deco
def other_decorated(x):
    return x * 3

def gen():
    yield 1

def forks(during, check):
    import os
    seen = during()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if check() else 1)
    _, status = os.waitpid(pid, 0)
    return seen, os.waitstatus_to_exitcode(status)

async def coro():
    return 1
'''


@pytest.fixture
def target(tmp_path, monkeypatch):
    (tmp_path / "frameless_target.py").write_text(TARGET_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("frameless_target", None)
    yield importlib.import_module("frameless_target")
    sys.modules.pop("frameless_target", None)


@pytest.fixture
def installer(start):
    """An Installer of its own in an EngineCore (uninstalled after: its sys.monitoring tool id is freed)."""
    made: list[Installer] = []
    started: dict[str, object] = {}

    def _make(kind: str = "engine_core"):
        st = started.get(kind) or started.setdefault(kind, start(kind, "0.26.0"))
        inst = Installer(st.rt, st.rt.tracer, version="0.26.0", probes=st.installer.probes)
        made.append(inst)
        return st, inst
    yield _make
    for inst in made:
        inst.uninstall()


def _row(qualname: str, span: str = "Capture CUDA graphs", hook: str = "span", **kw) -> PatchPoint:
    return PatchPoint(f"frameless_target:{qualname}", span, "cudagraph_capture_mode", "any", hook=hook, **kw)


@monitoring
def test_a_span_row_is_traced_with_no_frame_of_ours_under_the_call(installer, target):
    st, inst = installer()
    inst._apply_one(target, _row("Runner.capture"))
    assert inst.status[_row("Runner.capture").key] == "applied" and st.rt.patch_frameless == 1
    assert target.Runner.__dict__["capture"].__code__.co_qualname == "Runner.capture"  # vLLM's function, unreplaced
    assert pickle.loads(pickle.dumps(target.Runner.capture)) is target.Runner.capture  # and pickles as itself
    assert target.Runner().capture([1, 2]) == ("captured", [1, 2], "FULL")
    assert target.SEEN == [[]]
    (span,) = st.spans("Capture CUDA graphs")
    assert span.end_time - span.start_time >= 2_000_000
    assert span.parent is not None and span.parent.span_id == st.rt.process_span.get_span_context().span_id
    assert sys.monitoring.get_events(inst.frameless.tool) == 0  # PY_UNWIND only while a call runs


@monitoring
def test_nested_rows_nest_their_spans_and_a_vllm_span_inside_hangs_under_ours(installer, target):
    from opentelemetry import trace

    st, inst = installer()
    inst._apply_one(target, _row("Runner.outer", "Engine init"))
    inst._apply_one(target, _row("Runner.capture"))
    tracer = trace.get_tracer("vllm.test")
    orig = target.Runner.capture

    def traced(self, *a, **k):  # vLLM's own span inside ours (the current context is our span's)
        with tracer.start_as_current_span("Capture model"):
            return orig(self, *a, **k)
    target.Runner().outer()
    (outer,) = st.spans("Engine init")
    (inner,) = st.spans("Capture CUDA graphs")
    assert inner.parent.span_id == outer.context.span_id
    assert target.SEEN == [[], []]
    target.Runner.capture = traced
    try:
        target.Runner().outer()
    finally:
        target.Runner.capture = orig
    native = st.spans("Capture model")[0]
    assert native.parent.span_id == st.spans("Engine init")[1].context.span_id


@monitoring
def test_the_probe_gets_the_calls_arguments_as_a_wrapper_gives_them(installer, target, monkeypatch):
    st, inst = installer()
    seen = []
    monkeypatch.setattr(inst.probes, "after_call", lambda name, span, call: seen.append((name, span, call)))
    inst._apply_one(target, _row("Runner.capture", probe="capture_mode"))
    runner = target.Runner()
    runner.capture([8, 4], "PIECEWISE", "x", warmup=3, fast=True)
    ((name, span, call),) = seen
    assert name == "capture_mode" and span is not None and call.instance is runner
    assert call.args == ([8, 4], "PIECEWISE", "x") and call.result == ("captured", [8, 4], "PIECEWISE")
    assert call.arg(0, "sizes") == [8, 4] and call.arg(1, "mode") == "PIECEWISE"
    assert call.kwargs["warmup"] == 3 and call.kwargs["fast"] is True


@monitoring
def test_an_exception_leaving_the_call_is_the_callers_very_object_and_the_spans_error(installer, target):
    st, inst = installer()
    inst._apply_one(target, _row("Runner.fail", "Engine init", hook="guard"))
    ev = sysmon.current()
    unwinds, switches = ev.unwinds, ev.switches
    with pytest.raises(RuntimeError) as caught:
        target.Runner().fail()
    # counted for the self-cost line: the call's frame unwound through our callback; PY_UNWIND went on, then off
    assert ev.unwinds > unwinds and ev.switches == switches + 2
    assert target.SEEN == [[]]
    assert not any("vllm_otel_startup" in f.filename for f in traceback.extract_tb(caught.value.__traceback__))
    (span,) = st.spans("Engine init")
    assert span.status.status_code.name == "ERROR" and span.events[0].name == "exception"
    assert st.rt.done and st.rt.process_span.attributes[sc.OUTCOME] == "failed"  # the guard's effect
    assert st.rt.last_error is caught.value
    assert sys.monitoring.get_events(inst.frameless.tool) == 0


@monitoring
def test_a_system_exit_leaving_a_guard_row_fails_the_start(installer, target):
    st, inst = installer()
    inst._apply_one(target, PatchPoint("frameless_target:exits", "Worker init", "worker_init", "worker", hook="guard"))
    with pytest.raises(SystemExit):
        target.exits()
    (span,) = st.spans("Worker init")
    assert span.status.status_code.name == "UNSET"  # as OpenTelemetry does: no Exception, no ERROR
    assert st.rt.done and st.rt.process_span.attributes[sc.OUTCOME] == "failed"


@monitoring
def test_a_ready_row_ends_the_start_when_its_call_returns(installer, target):
    st, inst = installer()
    inst._apply_one(target, PatchPoint("frameless_target:Runner.capture", "EngineCoreProc init", "engine_core_init",
                                       "engine_core", hook="ready", ends="engine_core"))
    assert not st.rt.done
    target.Runner().capture([1])
    assert st.rt.done and st.rt.process_span.attributes[sc.OUTCOME] == "ready"
    assert st.rt.process_span.attributes[sc.PATCH_FRAMELESS] == 1


@monitoring
def test_recursion_and_threads_each_get_their_own_spans(installer, target):
    st, inst = installer()
    inst._apply_one(target, _row("loop", "Loop"))
    threads = [threading.Thread(target=target.loop, args=(2,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = st.spans("Loop")
    assert len(spans) == 9
    by_id = {s.context.span_id: s for s in spans}

    def depth(span) -> int:  # a thread of its own starts with an empty context: its outer call is a root span
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        return 0 if parent is None else 1 + depth(parent)
    assert sorted(map(depth, spans)) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@monitoring
def test_a_decorated_target_is_monitored_through_wrapped_and_never_the_decorators_shared_code(installer, target):
    st, inst = installer()
    inst._apply_one(target, _row("decorated", "Decorated"))
    assert inst.frameless.tool is not None and st.rt.patch_frameless == 1
    assert target.decorated(2) == 4 and target.other_decorated(2) == 6  # the same inner wrapper code: not ours
    assert len(st.spans("Decorated")) == 1
    assert target.SEEN == [[]]


@monitoring
def test_a_function_vllm_imports_from_another_module_is_monitored_as_the_same_code(installer, target, tmp_path):
    """gpu_worker's ``from vllm.v1.worker.gpu.warmup import warmup_kernels`` (decorated there): the row names the
    importing module; the code is the defining module's, and every call of it is the row's."""
    (tmp_path / "frameless_user.py").write_text("from frameless_target import decorated\n")
    user = importlib.import_module("frameless_user")
    try:
        st, inst = installer()
        inst._apply_one(user, PatchPoint("frameless_user:decorated", "Decorated", "kernel_warmup", "any"))
        assert st.rt.patch_frameless == 1 and user.decorated is target.decorated  # nothing replaced
        assert user.decorated(2) == 4 and target.decorated(3) == 6
        assert target.SEEN == [[], []] and len(st.spans("Decorated")) == 2
    finally:
        sys.modules.pop("frameless_user", None)


@monitoring
def test_generators_coroutines_and_aliases_keep_the_wrapper(installer, target):
    st, inst = installer()
    for qual in ("gen", "coro"):
        inst._apply_one(target, _row(qual, qual))
    target.aliased = target.Runner.static  # a function of another name: not the row's own code
    inst._apply_one(target, _row("aliased", "Aliased"))
    assert st.rt.patch_frameless == 0 and st.rt.patch_applied == 3
    assert hasattr(target.gen, "__wrapped__") and hasattr(target.aliased, "__wrapped__")
    assert list(target.gen()) == [1] and target.aliased(1) == 2
    assert len(st.spans("gen")) == 1 and len(st.spans("Aliased")) == 1


@monitoring
def test_a_static_method_row_has_no_instance(installer, target, monkeypatch):
    st, inst = installer()
    seen = []
    monkeypatch.setattr(inst.probes, "after_call", lambda name, span, call: seen.append(call))
    inst._apply_one(target, _row("Runner.static", "Static", probe="capture_mode"))
    assert target.Runner.static(1) == 2 and target.Runner().static(2) == 3
    assert [(c.instance, c.args) for c in seen] == [(None, (1,)), (None, (2,))]


@monitoring
def test_off_frameless_and_taken_tool_ids_keep_the_wrapper(installer, target, monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "frameless")
    st, inst = installer()
    assert inst.frameless is None
    monkeypatch.delenv("OTEL_PYTHON_VLLM_STARTUP_OFF")
    monkeypatch.setattr(sysmon, "_EVENTS", sysmon.Events())  # a process whose ids are all taken by other tools
    taken = [t for t in sysmon.TOOL_IDS if sys.monitoring.get_tool(t) is None]
    for t in taken:
        sys.monitoring.use_tool_id(t, "someone else")
    try:
        st, inst = installer()
        inst._apply_one(target, _row("Runner.capture"))
        assert st.rt.patch_frameless == 0 and hasattr(target.Runner.__dict__["capture"], "__wrapped__")
        target.Runner().capture([1])
        assert len(st.spans("Capture CUDA graphs")) == 1
    finally:
        for t in taken:
            sys.monitoring.free_tool_id(t)


@monitoring
def test_uninstall_stops_every_event_and_frees_the_tool_id(installer, target):
    st, inst = installer()
    inst._apply_one(target, _row("Runner.capture"))
    tool = inst.frameless.tool
    inst.uninstall()
    assert sys.monitoring.get_local_events(tool, target.Runner.capture.__code__) == 0
    assert inst.frameless.tool is None  # (the id itself is the process's: freed with its last watched code)
    target.Runner().capture([1])
    assert st.spans("Capture CUDA graphs") == []


@monitoring
def test_a_step_of_ours_that_fails_never_reaches_vllm(installer, target, monkeypatch):
    st, inst = installer()
    inst._apply_one(target, _row("Runner.capture"))

    def broken(*a, **k):
        raise ValueError("ours")
    monkeypatch.setattr(st.rt.tracer, "start_span", broken)
    assert target.Runner().capture([1]) == ("captured", [1], "FULL")
    with pytest.raises(RuntimeError, match="vLLM's own failure"):
        target.Runner().fail()


def test_without_sys_monitoring_every_row_is_wrapped(installer, target, monkeypatch):
    monkeypatch.delattr(sys, "monitoring", raising=False)
    st, inst = installer()
    assert inst.frameless is None and not sysmon.available()
    inst._apply_one(target, _row("Runner.capture"))
    assert hasattr(target.Runner.__dict__["capture"], "__wrapped__") and st.rt.patch_frameless == 0
    target.Runner().capture([1])
    assert len(st.spans("Capture CUDA graphs")) == 1


@monitoring
def test_an_enrich_row_gives_its_probe_the_call_with_no_span(installer, target, monkeypatch):
    st, inst = installer()
    seen = []
    monkeypatch.setattr(inst.probes, "after_call", lambda name, span, call: seen.append((name, span, call)))
    inst._apply_one(target, PatchPoint("frameless_target:Runner.capture", "", "weights_load", "any", hook="enrich",
                                       probe="prepare_weights"))
    runner = target.Runner()
    assert runner.capture([2]) == ("captured", [2], "FULL") and target.SEEN == [[]]
    ((name, span, call),) = seen
    assert (name, span, call.instance, call.args) == ("prepare_weights", None, runner, ([2], "FULL"))
    assert st.rt.patch_frameless == 1


@monitoring
def test_a_child_forked_inside_a_monitored_call_turns_unwinding_off(installer, target):
    """vLLM forks its workers inside monitored calls (VLLM_WORKER_MULTIPROC_METHOD=fork): the child never returns
    through the parent's calls, so it must not keep PY_UNWIND (every exception of its life through our callback)."""
    st, inst = installer()
    inst._apply_one(target, _row("forks", "Forks"))

    def events_now() -> int:
        return sys.monitoring.get_events(sysmon.events().tool)
    parent, child = target.forks(events_now, lambda: events_now() == 0 and inst.frameless._running == 0)
    assert (parent, child) == (sys.monitoring.events.PY_UNWIND, 0)
    assert events_now() == 0 and len(st.spans("Forks")) == 1
