"""Never raise into vLLM: every hook kind (``wrappers.BUILDERS``), installed by the real ``instrument()`` and
Installer over fake targets, behaves exactly as unpatched (same result, the very same exception object) while
each internal step it takes, and each collaborator those steps call, is made to raise; every such failure is
seen, once per process."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import sys
import time
import types

import pytest
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import Span as SdkSpan

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import guard
from vllm_otel_startup.agent.foundation.patch_points import SPAN_PHASES, PatchPoint
from vllm_otel_startup.agent.foundation.process import SPAWN_ENV
from vllm_otel_startup.agent.patching import hooks, wrappers

RESULT = object()  # what vLLM's function returns
ERR = RuntimeError("vLLM's own failure")  # what it raises (one object: the caller must get this very one)
EXIT = SystemExit(3)
BODY_ERR = KeyError("raised inside the with block")


class Internal(Exception):  # noqa: N818 - a failure of ours, injected
    pass


# one patch point per hook kind (a kind added to wrappers.BUILDERS without a row here fails the tests below)
POINTS: dict[str, dict] = {
    "span": {"span": "Config resolution", "phase": "config", "probe": "config"},
    "spawn": {"span": "Engine spawn", "phase": "engine_spawn", "child": "engine_core"},
    "ready": {"span": "HTTP startup", "phase": "http_startup", "ends": "worker"},
    "guard": {"span": "Worker init", "phase": "worker_init"},
    "marker": {"span": "", "phase": "cli", "segment": sc.CLI_SPAN},
    "ctx": {"span": "torch.compile", "phase": "torch_compile"},
    "enrich": {"span": "", "phase": "weights_load", "probe": "prepare_weights"},
    "once": {"span": "CUDA init", "phase": "cuda_init"},
    "since": {"span": "Engine connect", "phase": "engine_connect", "since": "Engine handshake"},
}
KINDS = sorted(wrappers.BUILDERS)


def _outcome(mode: str):
    if mode == "raise":
        raise ERR
    if mode == "exit":
        raise EXIT
    return RESULT


def make_target(kind: str, is_async: bool):
    if kind == "ctx":  # vLLM's monitors: a generator-based context manager
        @contextlib.contextmanager
        def target(mode):
            if mode == "enter-raise":
                raise ERR
            try:
                yield RESULT
            except KeyError:
                if mode != "suppress":
                    raise
        return target
    if is_async:
        async def target(mode):
            await asyncio.sleep(0)
            return _outcome(mode)
        return target

    def target(mode):  # noqa: F811
        return _outcome(mode)
    return target


def exercise(fn, kind: str, is_async: bool, mode: str) -> tuple[str, object]:
    """What a caller of ``fn`` sees: ("returned", value) or ("raised", the exception object)."""
    try:
        if kind == "ctx":
            with fn(mode) as value:
                if mode in ("body-raise", "suppress"):
                    raise BODY_ERR
            return "returned", value
        return "returned", asyncio.run(fn(mode)) if is_async else fn(mode)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: it is what vLLM raised
        return "raised", exc


def conventions(kind: str) -> list[tuple[bool, str]]:
    """(is_async, mode) pairs a kind is exercised with."""
    if kind == "ctx":
        return [(False, m) for m in ("ok", "enter-raise", "body-raise", "suppress")]
    return [(a, m) for a in (False, True) for m in ("ok", "raise", "exit")]


_names = itertools.count()


def patched(st, kind: str, is_async: bool):
    """(vLLM's function, the same function as the real Installer patched it) in a fresh module."""
    name = f"guard_targets_{next(_names)}"
    mod = types.ModuleType(name)
    mod.target = raw = make_target(kind, is_async)
    point = PatchPoint(f"{name}:target", process="any", hook=kind, **POINTS[kind])
    if point.since:  # the span it starts from ended in this process: (start, end, name, id, parent id, phase)
        st.rt.local.append((time.time_ns(), time.time_ns(), point.since, 1, None, SPAN_PHASES[point.since]))
    st.installer.apply(mod, [point])
    assert st.installer.status[point.key] == "applied"
    assert mod.target is not raw and mod.target.__wrapped__ is raw
    return raw, mod.target


def same(got: tuple[str, object], want: tuple[str, object]) -> bool:
    return got[0] == want[0] and got[1] is want[1]


@pytest.fixture(autouse=True)
def _fresh_guard():
    guard.reset()
    yield
    guard.reset()


@pytest.fixture
def worker(start, monkeypatch):
    """A worker process instrumented for real; its finish is a no-op (a ready or guard hook would otherwise end
    this process's start after the first call, and every later call would pass through untouched)."""
    st = start("worker")
    for k in SPAWN_ENV:  # a spawn step made to fail leaves the child's variables set: gone after the test
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    finished = []
    monkeypatch.setattr(st.rt, "finish", lambda *a, **k: finished.append((a, k)))
    st.finished = finished
    return st


def test_every_kind_has_a_target_here():
    assert set(POINTS) == set(wrappers.BUILDERS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_unhurt_behaves_as_unpatched(worker, kind):
    before = trace_api.get_current_span()
    for is_async, mode in conventions(kind):
        raw, fn = patched(worker, kind, is_async)
        assert same(exercise(fn, kind, is_async, mode), exercise(raw, kind, is_async, mode)), (is_async, mode)
        assert trace_api.get_current_span() is before  # our span is left, whatever vLLM did
        assert not [k for k in SPAWN_ENV if k in os.environ]  # the child's variables are restored
    if POINTS[kind]["span"]:
        assert worker.spans(POINTS[kind]["span"]), "the hook did its work"


def test_a_since_row_on_another_rows_target_ends_as_that_rows_span_opens(worker):
    """The table's one shared target (init_worker_distributed_environment: `OpenMP binding` since `CPU topology`,
    then `Distributed init`): both wrap, the since span ends where the other span starts, beside it (not its
    child), each row's status is its own, and uninstalling puts vLLM's function back."""
    mod = types.ModuleType("guard_shared_target")
    mod.target = raw = make_target("span", False)
    span_row = PatchPoint("guard_shared_target:target", "Distributed init", "distributed_init", "any")
    since_row = PatchPoint("guard_shared_target:target", "OpenMP binding", "omp_binding", "any", hook="since",
                           since="CPU topology")
    t0 = time.time_ns()
    worker.rt.local.append((t0, t0, "CPU topology", 1, None, "cpu_topology"))
    worker.installer.apply(mod, [span_row, since_row])
    assert {worker.installer.status[p.key] for p in (span_row, since_row)} == {"applied"}
    assert mod.target.__wrapped__.__wrapped__ is raw
    worker.installer.apply(mod, [span_row, since_row])  # a second import hook run wraps nothing more
    assert mod.target.__wrapped__.__wrapped__ is raw
    assert same(exercise(mod.target, "span", False, "ok"), exercise(raw, "span", False, "ok"))
    [gap], [dist] = worker.spans("OpenMP binding"), worker.spans("Distributed init")
    assert gap.start_time == t0 and gap.end_time <= dist.start_time
    assert gap.parent is None or gap.parent.span_id != dist.context.span_id
    worker.installer.uninstall()
    assert mod.target is raw


def test_a_since_span_never_starts_before_the_span_it_runs_in(worker):
    """Its ``since`` span ended before the current span began (vLLM 0.32 reads the CPU topology while constructing the
    worker, outside Init device): the since span starts with the current span, inside it."""
    mod = types.ModuleType("guard_since_clamped")
    mod.target = make_target("span", False)
    row = PatchPoint("guard_since_clamped:target", "OpenMP binding", "omp_binding", "any", hook="since",
                     since="CPU topology")
    t0 = time.time_ns()
    worker.rt.local.append((t0 - 5_000_000, t0 - 4_000_000, "CPU topology", 1, None, "cpu_topology"))
    worker.installer.apply(mod, [row])
    with worker.rt.tracer.start_as_current_span("Init device", start_time=t0):
        mod.target("ok")
    [gap], [parent] = worker.spans("OpenMP binding"), worker.spans("Init device")
    assert gap.start_time == parent.start_time == t0 and gap.parent.span_id == parent.context.span_id


# ---- every step of every kind, made to raise ------------------------------------------------------------
def _positions(st, kind: str) -> list[tuple[str, int]]:
    point = PatchPoint("x:y", process="any", hook=kind, **POINTS[kind])
    steps = wrappers.BUILDERS[kind](wrappers.Hook(st.rt, st.rt.tracer, st.installer.probes, point, True, False))
    return ([("before", i) for i in range(len(steps.before))] + [("after", i) for i in range(len(steps.after))]
            + [("wrap", 0)] * (steps.wrap is not None))


def _breaking(builder, where: str, index: int, fired: list):
    def boom(*args):
        fired.append((where, index))
        raise Internal(f"{where}[{index}]")

    def build(h):
        steps = builder(h)
        if where == "wrap":
            return dataclasses.replace(steps, wrap=boom)
        seq = list(getattr(steps, where))
        seq[index] = boom
        return dataclasses.replace(steps, **{where: tuple(seq)})
    return build


@pytest.mark.parametrize("kind", KINDS)
def test_every_step_of_every_kind_can_fail_without_vllm_noticing(worker, kind, monkeypatch, caplog):
    builder = wrappers.BUILDERS[kind]
    positions = _positions(worker, kind)
    assert positions, "a kind with no step of ours"
    caplog.set_level(logging.WARNING, logger="vllm_otel_startup")
    for where, index in positions:
        fired: list = []
        monkeypatch.setitem(wrappers.BUILDERS, kind, _breaking(builder, where, index, fired))
        for is_async, mode in conventions(kind):
            raw, fn = patched(worker, kind, is_async)
            want = exercise(raw, kind, is_async, mode)
            assert same(exercise(fn, kind, is_async, mode), want), (where, index, is_async, mode)
        assert fired, f"{kind}: step {where}[{index}] never ran"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "internal error" in r.getMessage()]
    assert len(warnings) == 1 and guard.HOOKS in warnings[0].getMessage()
    assert warnings[0].exc_info and isinstance(warnings[0].exc_info[1], Internal)  # with its traceback


# ---- every collaborator the steps call, made to raise -----------------------------------------------------
class Collaborators:
    """The internal collaborators of the wrappers' steps, each replaced by a spy that records its use and, when
    named in ``failing``, raises instead of doing its work."""

    def __init__(self, st, monkeypatch) -> None:
        self.failing: set[str] = set()
        self.used: set[str] = set()
        self.fired: set[str] = set()
        rt = st.rt
        plain = {
            "Runtime.close_segment": (rt, "close_segment"),
            "Runtime.finish": (rt, "finish"),  # the fixture's no-op: never ends this start
            "Runtime.fleet": (rt, "fleet"),
            "Probes.after_call": (st.installer.probes, "after_call"),
            "Tracer.start_span": (rt.tracer, "start_span"),
            "context.attach": (otel_context, "attach"),
            "context.detach": (otel_context, "detach"),
            "context.get_current": (otel_context, "get_current"),
            "trace.get_current_span": (trace_api, "get_current_span"),
            "propagate.inject": (propagate, "inject"),
            "time.time_ns": (wrappers.time, "time_ns"),
        }
        for name, (owner, attr) in plain.items():
            if owner is wrappers.time:  # only the wrappers' clock (the sampler thread reads its own)
                clock = types.SimpleNamespace(time_ns=self._spy(name, owner.time_ns))
                monkeypatch.setattr(wrappers, "time", clock)
            else:
                monkeypatch.setattr(owner, attr, self._spy(name, getattr(owner, attr)))
        for meth in ("end", "record_exception", "set_status", "set_attribute", "is_recording"):
            monkeypatch.setattr(SdkSpan, meth, self._spy(f"Span.{meth}", vars(SdkSpan)[meth]))
        live = vars(wrappers.Hook)["live"]
        monkeypatch.setattr(wrappers.Hook, "live", property(self._spy("Hook.live", live.fget)))

    def _spy(self, name: str, real):
        def spy(*args, **kwargs):
            self.used.add(name)
            if name in self.failing:
                self.fired.add(name)
                raise Internal(name)
            return real(*args, **kwargs)
        return spy


@pytest.fixture
def collaborators(worker, monkeypatch):
    co = Collaborators(worker, monkeypatch)
    yield co
    co.failing = set()  # the instrumentation is undone (fixture teardown) with working collaborators


# what each kind must at least call (the spies prove the injection reached it)
NEEDS = {
    "span": {"Hook.live", "Tracer.start_span", "context.attach", "context.detach", "Span.end", "Probes.after_call"},
    "spawn": {"Tracer.start_span", "context.get_current", "propagate.inject", "Runtime.fleet", "Span.end"},
    "ready": {"Tracer.start_span", "Span.end", "Span.record_exception", "Span.set_status", "Runtime.finish"},
    "guard": {"Tracer.start_span", "Span.end", "Runtime.finish"},
    "marker": {"Hook.live", "Runtime.close_segment", "time.time_ns"},
    "ctx": {"Hook.live", "trace.get_current_span", "Tracer.start_span", "context.attach", "Span.end"},
    "enrich": {"Hook.live", "Probes.after_call"},
    "once": {"Hook.live", "time.time_ns", "Tracer.start_span", "Span.end"},
    "since": {"Hook.live", "time.time_ns", "Tracer.start_span", "Span.end"},
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_collaborator_of_every_kind_can_fail_without_vllm_noticing(worker, kind, collaborators):
    co = collaborators
    for is_async, mode in conventions(kind):
        raw, fn = patched(worker, kind, is_async)
        assert same(exercise(fn, kind, is_async, mode), exercise(raw, kind, is_async, mode))
    used = set(co.used)
    assert NEEDS[kind] <= used, NEEDS[kind] - used
    for name in sorted(used) + ["all at once"]:
        co.failing = used if name == "all at once" else {name}
        co.fired.clear()
        for is_async, mode in conventions(kind):
            raw, fn = patched(worker, kind, is_async)
            co.failing, failing = set(), co.failing  # vLLM's own behaviour, read without our faults
            want = exercise(raw, kind, is_async, mode)
            co.failing = failing
            assert same(exercise(fn, kind, is_async, mode), want), (name, is_async, mode)
        # (a collaborator used only incidentally, e.g. by an import watched inside the call, may not be reached)
        assert co.fired or name not in NEEDS[kind], f"{kind}: {name} was never reached"
        assert co.fired or name != "all at once"


def test_a_broken_logging_setup_is_no_excuse_to_raise(worker, collaborators):
    """Reporting a failure must not fail either: a log handler that raises is swallowed too."""
    class Raising(logging.Handler):
        def emit(self, record):
            raise Internal("handler")

    log = logging.getLogger("vllm_otel_startup")
    handler = Raising()
    log.addHandler(handler)
    try:
        co = collaborators
        co.failing = {"Tracer.start_span", "Runtime.finish"}
        for kind in KINDS:
            for is_async, mode in conventions(kind):
                raw, fn = patched(worker, kind, is_async)
                assert same(exercise(fn, kind, is_async, mode), exercise(raw, kind, is_async, mode))
        assert co.fired == co.failing
    finally:
        log.removeHandler(handler)


def test_an_internal_failure_costs_one_warning_per_process_not_one_per_call(worker, collaborators, caplog):
    co = collaborators
    co.failing = {"Tracer.start_span"}
    with caplog.at_level(logging.DEBUG, logger="vllm_otel_startup"):
        for _ in range(5):
            for kind in ("span", "ready", "guard", "spawn", "ctx"):
                raw, fn = patched(worker, kind, False)
                assert same(exercise(fn, kind, False, "ok"), ("returned", RESULT))
    ours = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert [r.levelno for r in ours].count(logging.WARNING) == 1
    assert len(ours) == 25 and all(r.levelno == logging.DEBUG for r in ours[1:])  # each failure still logged
    assert "Tracer.start_span" in str(ours[0].exc_info[1]) and "patched call" in ours[0].getMessage()


def test_a_forked_child_warns_again(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        for _ in range(2):
            guard.safe(guard.READY, lambda: 1 / 0)
        guard.reset()  # what os.register_at_fork runs in the child
        guard.safe(guard.READY, lambda: 1 / 0)
    assert len([r for r in caplog.records if "internal error" in r.getMessage()]) == 2


def test_the_span_is_left_and_the_start_goes_on_when_a_later_step_fails(worker, collaborators):
    """Steps are independent: a probe that raises does not keep the span current, nor skip the ready effect."""
    co = collaborators
    co.failing = {"Probes.after_call"}
    before = trace_api.get_current_span()
    raw, fn = patched(worker, "ready", False)
    assert fn("ok") is RESULT
    assert trace_api.get_current_span() is before
    (span,) = worker.spans("HTTP startup")
    assert span.end_time is not None and worker.finished  # ended, and the ready effect ran


def test_a_patch_that_cannot_be_applied_is_recorded_on_the_process_span(start, monkeypatch, caplog):
    st = start("worker")

    def refuse(*args, **kwargs):
        raise Internal("wrapt refused")

    monkeypatch.setattr(hooks, "wrap", refuse)
    mod = types.ModuleType("guard_unpatchable")
    mod.target = make_target("span", False)
    point = PatchPoint("guard_unpatchable:target", process="any", hook="span", **POINTS["span"])
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        st.installer.apply(mod, [point])  # inside vLLM's import of the module: nothing may escape
    assert st.installer.status[point.target] == "error"
    assert mod.target("ok") is RESULT  # vLLM runs unpatched there
    assert sum(point.target in r.getMessage() for r in caplog.records) == 1
    st.rt.finish()
    [proc] = st.spans(sc.WORKER_PROCESS_SPAN)
    assert proc.attributes[sc.PATCH_FAILED] == (point.target,)
    assert point.target not in proc.attributes.get(sc.PATCH_MISSING, ())



def test_the_import_and_compile_watchers_never_raise_either(start, monkeypatch, tmp_path, caplog):
    """The other wrappers of ours: the import watcher (every import of the process runs through it) and
    PyTorch's compile-region hooks; their steps made to raise, the import and the region work as without us."""
    torch_utils = pytest.importorskip("torch._dynamo.utils")
    from vllm_otel_startup.agent.patching import compile_stages
    from vllm_otel_startup.agent.resources import retro_spans

    st = start("worker")
    monkeypatch.setattr(retro_spans, "threading", types.SimpleNamespace(get_ident=lambda: 1 / 0))
    for name in ("_start_args", "_end_args", "_instant_args"):
        monkeypatch.setattr(compile_stages, name, lambda *a, **k: {}["torch changed its signature"])
    (tmp_path / "guard_watched_mod.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        import guard_watched_mod

        with pytest.raises(ZeroDivisionError), torch_utils.dynamo_timed("guarded_region"):
            1 / 0  # noqa: B018 - torch's region left by an exception of its own: that one reaches the caller
    assert guard_watched_mod.VALUE == 42
    assert st.spans("guarded_region") == []
    areas = [r.getMessage() for r in caplog.records if "internal error" in r.getMessage()]
    assert len(areas) == 2 and any(guard.SPANS in a for a in areas) and any(guard.HOOKS in a for a in areas)
    sys.modules.pop("guard_watched_mod", None)


def test_a_report_made_while_a_report_runs_in_the_same_thread_never_waits():
    """A collection can start inside ``failed`` (any allocation, even the record of which areas have warned) and run
    our gc callback, whose own failure reports again from the same thread: that report returns (a lock held by the
    first one hung the unit tier once). Here the first report's area reports from inside that record."""
    guard.reset()
    reported: list[str] = []

    class Area(str):
        def __hash__(self):  # the record looks the area up: a second report from inside the first
            if not reported:
                reported.append("inner")
                try:
                    raise ValueError("inner")
                except ValueError:
                    guard.failed(guard.SPANS, "inner step")
            return str.__hash__(self)

    try:
        raise ValueError("outer")
    except ValueError:
        guard.failed(Area(guard.HOOKS), "outer step")
    assert reported == ["inner"]
    assert set(guard._warned) == {guard.HOOKS, guard.SPANS}
