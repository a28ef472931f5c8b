"""agent/patching/wrappers.py: one wrapper builder per hook kind, two runners. vLLM's function is called exactly
once with its own arguments, its result returned and its exception re-raised (the very same object); our steps run
around it each on its own, so one that fails loses only its work; only a ``wrap`` step may hand back a stand-in, and
where it fails vLLM's result is returned. A span hook opens our span around the call, records an exception as
OpenTelemetry does, and ends the span. (Every step of every kind made to fail: agent/patching/test_guard.py.)"""

from __future__ import annotations

import asyncio

import pytest
from spans import assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.patch_points import HOOKS, PatchPoint
from vllm_otel_startup.agent.patching import wrappers
from vllm_otel_startup.agent.patching.wrappers import Hook, Steps


def test_every_hook_kind_of_the_table_has_a_builder_but_the_clis_end_which_wraps_nothing():
    assert set(wrappers.BUILDERS) == set(HOOKS) - {"cli_main"}  # patching/cli_exit.py


def _steps(seen: list, fail: str | None = None, wrap=None) -> Steps:
    def before(h, c):
        seen.append(("before", c.args, c.kwargs))
        if fail == "before":
            raise RuntimeError("planted before")

    def after(h, c, result, exc):
        seen.append(("after", result, exc))
        if fail == "after":
            raise RuntimeError("planted after")

    return Steps(before=(before,), after=(after,), wrap=wrap)


def test_vllms_function_runs_once_with_its_arguments_and_its_result_is_returned():
    seen, calls = [], []

    def vllm_fn(a, b=0):
        calls.append((a, b))
        return a + b

    wrapper = wrappers._sync(None, _steps(seen))  # noqa: SLF001
    assert wrapper(vllm_fn, None, (1,), {"b": 2}) == 3
    assert calls == [(1, 2)] and seen == [("before", (1,), {"b": 2}), ("after", 3, None)]


def test_vllms_exception_is_re_raised_the_very_same_object():
    seen, err = [], KeyError("vllm's own")

    def vllm_fn():
        raise err

    with pytest.raises(KeyError) as raised:
        wrappers._sync(None, _steps(seen))(vllm_fn, None, (), {})  # noqa: SLF001
    assert raised.value is err and seen[-1] == ("after", None, err)


@pytest.mark.parametrize("fail", ["before", "after"])
def test_a_failing_step_of_ours_loses_only_its_work(fail):
    seen = []
    assert wrappers._sync(None, _steps(seen, fail))(lambda: "result", None, (), {}) == "result"  # noqa: SLF001
    assert [s[0] for s in seen] == ["before", "after"]


def test_only_a_wrap_step_hands_back_a_stand_in_and_a_failing_one_hands_back_vllms_result():
    stand_in = object()
    wrapper = wrappers._sync(None, _steps([], wrap=lambda h, c, r: stand_in))  # noqa: SLF001
    assert wrapper(lambda: 1, None, (), {}) is stand_in

    def broken(h, c, r):
        raise RuntimeError("planted wrap")

    assert wrappers._sync(None, _steps([], wrap=broken))(lambda: 1, None, (), {}) == 1  # noqa: SLF001


def test_the_async_runner_makes_vllms_coroutine_at_the_call_and_steps_around_its_await():
    seen, made = [], []

    async def vllm_coro(x):
        seen.append(("ran", x))
        return x * 2

    def vllm_fn(x):
        made.append(x)
        return vllm_coro(x)

    awaitable = wrappers._async(None, _steps(seen))(vllm_fn, None, (21,), {})  # noqa: SLF001
    assert made == [21] and seen == []  # made at the call, as unpatched; nothing of ours ran yet
    assert asyncio.run(awaitable) == 42
    assert seen == [("before", (21,), {}), ("ran", 21), ("after", 42, None)]


def _span_hook(start, **point) -> tuple[Hook, object]:
    s = start("worker", "0.33.0")
    row = PatchPoint(target="vos_fake:f", span="Load weights", phase="weights_load", process="worker", **point)
    return Hook(s.rt, s.rt.tracer, s.installer.probes, row, emit_span=True, is_async=False), s


def test_a_span_hook_opens_our_span_around_the_call_and_marks_an_exception(start):
    hook, s = _span_hook(start)
    wrapper = wrappers.build(hook)
    assert wrapper(lambda: "ok", None, (), {}) == "ok"
    [span] = s.spans("Load weights")
    assert span.instrumentation_scope.name == sc.INSTRUMENTATION_NAME
    assert_attributes(span, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"})
    err = ValueError("bad checkpoint")
    with pytest.raises(ValueError) as raised:
        wrapper(lambda: (_ for _ in ()).throw(err), None, (), {})
    assert raised.value is err
    failed = s.spans("Load weights")[-1]
    assert failed.status.status_code.name == "ERROR" and failed.status.description == "ValueError: bad checkpoint"
    assert [e.name for e in failed.events] == ["exception"] and s.rt.last_error is err


def test_a_span_hook_after_ready_only_calls_vllm(start):
    hook, s = _span_hook(start)
    s.rt.finish()
    before = len(s.spans("Load weights"))
    assert wrappers.build(hook)(lambda: "served", None, (), {}) == "served"
    assert len(s.spans("Load weights")) == before


def test_where_vllm_traces_the_call_itself_no_span_of_ours_is_made(start):
    hook, s = _span_hook(start)
    native = Hook(hook.rt, hook.tracer, hook.probes, hook.point, emit_span=False, is_async=False)
    assert wrappers.build(native)(lambda: 7, None, (), {}) == 7
    assert s.spans("Load weights") == []
