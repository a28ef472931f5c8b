"""One vocabulary across vLLM 0.10 -> 0.33: our patch points on fake module trees shaped like real releases."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time

import pytest
from spans import assert_attributes, process_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.process import ENV_KIND, ENV_PARENT


def call(target: str, *args, **kwargs):
    module, qual = target.split(":")
    obj = importlib.import_module(module)
    parts = qual.split(".")
    if len(parts) == 2:
        cls = getattr(obj, parts[0])
        return cls(*args, **kwargs) if parts[1] == "__init__" else getattr(cls(), parts[1])(*args, **kwargs)
    return getattr(obj, parts[0])(*args, **kwargs)


def test_old_release_gets_our_spans_under_vllms_own_names(start):
    s = start("worker", "0.10.1")
    call("vllm.model_executor.model_loader.default_loader:DefaultModelLoader.load_weights")
    call("vllm.v1.worker.gpu_worker:Worker.init_device")
    [weights] = s.spans("Load weights")
    assert weights.instrumentation_scope.name == sc.INSTRUMENTATION_NAME
    assert_attributes(weights, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker"})  # ours: not NATIVE
    assert_attributes(s.spans("Init device")[0], {sc.PHASE: "device_init", sc.PROCESS_KIND: "worker"})
    status = s.installer.status
    assert status["vllm.model_executor.model_loader.default_loader:DefaultModelLoader.load_weights"] == "applied"
    # 0.10.1 has no v1 Executor.__init__: that row is for >= 0.12 and is not reported missing
    call("vllm.v1.executor.abstract:Executor.get_class")
    assert status["vllm.v1.executor.abstract:Executor.__init__"] == "out_of_range"
    assert "vllm.v1.executor.abstract:Executor.__init__" not in s.rt.patch_missing


def test_old_release_tokenizer_dispatch(start):
    s = start("api_server", "0.10.1")
    call("vllm.transformers_utils.tokenizer_group:init_tokenizer_from_configs")
    [tok] = s.spans("Tokenizer init")
    assert_attributes(tok, {sc.PHASE: "tokenizer", sc.PROCESS_KIND: "api_server"})


def test_new_release_adopts_native_spans_without_duplicates(start):
    s = start("worker", "0.33.0")
    call("vllm.model_executor.model_loader.default_loader:DefaultModelLoader.load_weights")
    [weights] = s.spans("Load weights")  # exactly one: vLLM's, not a second one of ours
    assert weights.instrumentation_scope.name != sc.INSTRUMENTATION_NAME
    assert_attributes(weights, {sc.PHASE: "weights_load", sc.NATIVE: True, sc.PROCESS_KIND: "worker"})
    assert s.installer.status[
        "vllm.model_executor.model_loader.default_loader:DefaultModelLoader.load_weights"] == "native"
    # parented to this process's span, in the same trace
    assert weights.parent.span_id == s.rt.process_span.get_span_context().span_id
    # what vLLM does not trace natively we add, with the same vocabulary
    call("vllm.v1.worker.gpu_worker:Worker.determine_available_memory")
    [kv] = s.spans("KV cache profiling")
    assert kv.instrumentation_scope.name == sc.INSTRUMENTATION_NAME


def test_new_release_tokenizer_is_renderer(start):
    s = start("api_server", "0.33.0")
    call("vllm.renderers.registry:renderer_from_config")
    [tok] = s.spans("Tokenizer init")
    assert_attributes(tok, {sc.PHASE: "tokenizer", sc.PROCESS_KIND: "api_server"})


def test_old_release_names_the_engine_connect_after_the_handshake(start):
    # vLLM < 0.17 binds the client's input socket only after READY: the time until the EngineCore's first message
    # (ZMQ's reconnect interval) is a span of its own, from the handshake's end to the engine monitor's start
    s = start("api_server", "0.15.1")
    call("vllm.v1.engine.utils:wait_for_engine_startup")
    time.sleep(0.02)
    call("vllm.v1.engine.core_client:MPClient.start_engine_core_monitor")
    [wait], [connect] = s.spans("Engine handshake"), s.spans("Engine connect")
    assert connect.start_time == wait.end_time and connect.end_time - connect.start_time >= 20_000_000
    assert_attributes(connect, {sc.PHASE: "engine_connect", sc.PROCESS_KIND: "api_server"})  # not WAITING


def test_engine_connect_needs_a_handshake_that_ended_in_this_process(start):
    s = start("api_server", "0.15.1")
    call("vllm.v1.engine.core_client:MPClient.start_engine_core_monitor")  # no handshake ended here: nothing
    assert s.spans("Engine connect") == []


def test_new_release_has_no_engine_connect_span(start):
    s = start("api_server", "0.17.0")
    call("vllm.v1.engine.utils:wait_for_engine_startup")
    call("vllm.v1.engine.core_client:MPClient.start_engine_core_monitor")
    assert s.spans("Engine connect") == []
    assert s.installer.status["vllm.v1.engine.core_client:MPClient.start_engine_core_monitor#since"] == "out_of_range"


def test_missing_target_is_logged_once_recorded_and_never_raised(start, caplog):
    target = "vllm.v1.engine.core:EngineCore._initialize_kv_caches"
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        s = start("engine_core", "0.33.0", drop=frozenset({target}))
        call("vllm.v1.engine.core:EngineCore.__init__")  # the module imports and works
    assert s.installer.status[target] == "missing"
    assert target in s.rt.patch_missing
    assert sum(target in r.getMessage() for r in caplog.records) == 1
    s.rt.finish()
    [proc] = s.spans(sc.ENGINE_CORE_PROCESS_SPAN)
    assert target in proc.attributes[sc.PATCH_MISSING]


def replace_body(module: str, qualname: str, new) -> None:
    """Give the fake release's function (inside vLLM's and our wrappers) another body."""
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    while hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    old = obj.__code__
    obj.__code__ = new.__code__.replace(co_name=old.co_name, co_qualname=old.co_qualname)
    obj.__globals__.update(new.__globals__)
    _keep_monitored(old, obj.__code__)


def _keep_monitored(old, new) -> None:
    """Python >= 3.12: the row of a function traced through sys.monitoring (patching/frameless.py) follows its new
    code object, as a wrapper around the function would have stayed."""
    from vllm_otel_startup import VllmStartupInstrumentor
    from vllm_otel_startup.agent.foundation import sysmon

    mon = getattr(VllmStartupInstrumentor._installer, "frameless", None)
    if mon is None or id(old) not in mon._rows:
        return
    sysmon.events().watch(new, mon)
    row = mon._rows.pop(id(old))
    row.code = new
    mon._rows[id(new)] = row
    sysmon.events().unwatch(old)


def traced(fn) -> bool:
    """Is ``fn`` one of our patch points: wrapped, or (Python >= 3.12) its code watched through sys.monitoring?"""
    from vllm_otel_startup import VllmStartupInstrumentor

    if hasattr(fn, "__wrapped__"):
        return True
    mon = getattr(VllmStartupInstrumentor._installer, "frameless", None)
    code = getattr(fn, "__code__", None)
    return mon is not None and mon.tool is not None and code is not None and bool(
        sys.monitoring.get_local_events(mon.tool, code))


SEEN: dict = {}


def _capture_env(self, *args, **kwargs):
    SEEN.update({k: os.environ.get(k) for k in (ENV_PARENT, ENV_KIND)})


def _boom(self, *args, **kwargs):
    raise RuntimeError("model failed to load")


def test_spawn_hands_the_trace_to_the_child_through_the_environment(start):
    s = start("api_server", "0.33.0")
    replace_body("vllm.v1.engine.utils", "CoreEngineProcManager.__init__", _capture_env)
    call("vllm.v1.engine.utils:CoreEngineProcManager.__init__")
    root_ctx = s.rt.process_span.get_span_context()
    assert SEEN[ENV_KIND] == "engine_core"
    assert SEEN[ENV_PARENT].split("-")[1] == f"{root_ctx.trace_id:032x}"
    assert os.environ.get(ENV_PARENT) is None and os.environ.get(ENV_KIND) is None  # restored
    [spawn] = s.spans("Engine spawn")
    assert_attributes(spawn, {sc.PHASE: "engine_spawn", sc.PROCESS_KIND: "api_server"})


def test_ready_point_ends_the_process_span_and_later_native_spans_are_dropped(start):
    s = start("engine_core", "0.33.0")
    call("vllm.v1.engine.core:EngineCoreProc.__init__")
    [proc] = s.spans(sc.ENGINE_CORE_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("engine_core", **{sc.OUTCOME: "ready"}))
    assert s.rt.done
    # a dummy run while serving must not look like startup
    call("vllm.v1.engine.core:EngineCore._initialize_kv_caches")
    assert s.spans("Prepare model") == []


def test_failure_in_a_phase_marks_the_phase_and_the_process(start):
    s = start("engine_core", "0.33.0")
    replace_body("vllm.v1.engine.core", "EngineCoreProc.__init__", _boom)
    try:
        call("vllm.v1.engine.core:EngineCoreProc.__init__")
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure must propagate unchanged")
    [proc] = s.spans(sc.ENGINE_CORE_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("engine_core", **{sc.OUTCOME: "failed", sc.ERROR_TYPE: "RuntimeError"}))
    assert proc.status.status_code.name == "ERROR"
    assert any(e.name == "exception" for e in proc.events)
    [init] = s.spans("EngineCoreProc init")
    assert init.status.status_code.name == "ERROR"


def test_a_ready_or_guard_call_vllm_traces_itself_gets_no_frame_of_ours(start):
    """Where vLLM traces a ready or guard row's call itself, the call is left as vLLM made it (a frame of ours under
    it shifts vLLM's stack onto CPython's data-stack chunk boundaries: issue 25): the start ends, or fails with the
    call's own exception, as vLLM's span ends."""
    import wrapt

    from vllm_otel_startup.agent.patching.hooks import _MARK

    s = start("engine_core", "0.33.0")
    core = importlib.import_module("vllm.v1.engine.core")
    init = vars(core.EngineCoreProc)["__init__"]
    assert not isinstance(init, wrapt.ObjectProxy) and not hasattr(init, _MARK), "wrapped"
    assert s.installer.status["vllm.v1.engine.core:EngineCoreProc.__init__"] == "native"
    assert "EngineCoreProc init" in s.rt.native_effects
    replace_body("vllm.v1.engine.core", "EngineCoreProc.__init__", _boom)
    with pytest.raises(RuntimeError) as raised:
        call("vllm.v1.engine.core:EngineCoreProc.__init__")
    [proc] = s.spans(sc.ENGINE_CORE_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("engine_core", **{sc.OUTCOME: "failed", sc.ERROR_TYPE: "RuntimeError"}))
    assert s.rt.last_error is raised.value


def _sigterm(self, *args, **kwargs):
    raise SystemExit(143)  # what vLLM's SIGTERM handler raises


def test_a_sigterm_inside_a_guarded_call_vllm_traces_fails_the_start_with_systemexit(start):
    """OpenTelemetry records only an Exception on vLLM's span: a SystemExit leaving the call is taken as it propagates
    through the span's end."""
    s = start("worker", "0.33.0")
    replace_body("vllm.v1.executor.multiproc_executor", "WorkerProc.__init__", _sigterm)
    assert "Worker init" in s.rt.native_effects  # imported: the row is vLLM's, not wrapped
    with pytest.raises(SystemExit):  # unchanged
        call("vllm.v1.executor.multiproc_executor:WorkerProc.__init__")
    [proc] = s.spans(sc.WORKER_PROCESS_SPAN)
    assert_attributes(proc, process_attributes("worker", **{sc.OUTCOME: "failed", sc.ERROR_TYPE: "SystemExit"}))


def test_bootstrap_segments_are_named_and_cover_the_start(start):
    s = start("api_server", "0.33.0")
    call("vllm.entrypoints.common.startup:cli_env_setup")
    call("vllm.entrypoints.cli.serve:ServeSubcommand.cmd")
    call("vllm.engine.arg_utils:EngineArgs.create_engine_config")
    names = [sp.name for sp in sorted(s.spans(), key=lambda x: x.start_time)]
    assert names[:4] == [sc.INTERPRETER_START_SPAN, sc.IMPORTS_SPAN, sc.CLI_SPAN, sc.EVENT_LOOP_SPAN]
    imports, cli = s.spans(sc.IMPORTS_SPAN)[0], s.spans(sc.CLI_SPAN)[0]
    assert imports.end_time == cli.start_time
    s.rt.finish()
    [root] = s.spans(sc.ROOT_SPAN)
    assert root.start_time == s.rt.info.create_ns
    assert root.attributes[sc.UNEXPLAINED_S] < 0.05


def test_uninstrument_undoes_what_instrument_did(start):
    import gc
    import importlib._bootstrap as bootstrap

    from opentelemetry import trace

    from vllm_otel_startup import VllmStartupInstrumentor

    s = start("worker", "0.10.1")
    s.rt.close_segment(time.time_ns())  # its imports are over: the watchers start
    worker = importlib.import_module("vllm.v1.worker.gpu_worker").Worker
    assert traced(worker.init_device)
    tool = getattr(s.installer.frameless, "tool", None)
    retro = s.rt.retro
    assert retro._gc in gc.callbacks
    assert bootstrap._find_and_load is retro._wrapper or retro._frameless is not None  # (frameless: watched)
    VllmStartupInstrumentor().uninstrument()
    assert not hasattr(worker.init_device, "__wrapped__")  # the original is back
    assert tool is None or sys.monitoring.get_tool(tool) is None  # or its events are stopped, the tool id freed
    assert retro._gc not in gc.callbacks and bootstrap._find_and_load is not retro._wrapper
    assert retro._frameless is None
    assert trace.get_current_span() is not s.rt.process_span  # its context is left
    assert not s.rt.active  # the span processor and the sampler hook are inert
    worker().init_device()
    assert s.spans("Init device") == []
