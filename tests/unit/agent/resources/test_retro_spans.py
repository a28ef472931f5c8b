"""Detail spans (agent/retro_spans.py): long garbage collections and slow imports inside a phase; CUDA init
traced on its first success. (A span's GPU memory: agent/resources/test_gpu.py.)"""

from __future__ import annotations

import gc
import os
import sys
import time
import types

import pytest
from spans import ANY, assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources import retro_spans


def _phase_span(rt, name="Load model"):
    return rt.tracer.start_as_current_span(name)


def test_a_long_collection_inside_a_phase_becomes_its_child(start, monkeypatch):
    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("worker")
    with _phase_span(st.rt) as phase:
        gc.collect()
    gcs = st.spans(sc.GC_SPAN)
    assert gcs and all(s.parent.span_id == phase.get_span_context().span_id for s in gcs)
    assert_attributes(gcs[-1], {sc.PROCESS_KIND: "worker", sc.PHASE: "gc", sc.GC_GENERATION: 2, sc.GC_COLLECTED: ANY})


def test_a_collection_between_phases_is_the_process_spans_child_at_its_end(start, monkeypatch):
    """No phase span current (vLLM between two phases, or our span processor as a phase begins): the collection
    is no parent's unexplained self time (0.4-0.8 s gen-2 collections had been an EngineCore's largest gap)."""
    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("engine_core")
    with _phase_span(st.rt, "Engine init"):  # closes the Imports segment
        pass
    assert st.spans(sc.GC_SPAN) == []
    before = time.time_ns()
    gc.collect()
    assert st.spans(sc.GC_SPAN) == []  # made when the startup ends: the process span is its parent
    st.rt.finish()
    process = st.rt.process_span.get_span_context().span_id
    (g,) = [s for s in st.spans(sc.GC_SPAN) if s.attributes[sc.GC_GENERATION] == 2]
    assert g.parent.span_id == process and g.start_time >= before
    # the main thread's: no THREAD_NAME
    assert_attributes(g, {sc.PROCESS_KIND: "engine_core", sc.PHASE: "gc", sc.GC_GENERATION: 2, sc.GC_COLLECTED: ANY})


def test_a_collection_another_thread_triggers_names_that_thread(start, monkeypatch):
    """Another thread's collection holds the GIL: the main thread, whatever phase it is in, waits for it. The name
    is read as the startup ends (outside the collection), as of the thread still running then (our export threads
    do; one gone by then is named by its ident)."""
    import threading

    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("engine_core")
    collected, finished = threading.Event(), threading.Event()

    def export_thread() -> None:
        gc.collect()
        collected.set()
        finished.wait(30)

    t = threading.Thread(target=export_thread, name="export-thread")
    with _phase_span(st.rt, "Engine init") as phase:
        t.start()
        assert collected.wait(30)
    st.rt.finish()
    finished.set()
    t.join()
    (g,) = [s for s in st.spans(sc.GC_SPAN) if s.attributes[sc.GC_GENERATION] == 2]
    assert g.parent.span_id == st.rt.process_span.get_span_context().span_id != phase.get_span_context().span_id
    assert_attributes(g, {sc.PROCESS_KIND: "engine_core", sc.PHASE: "gc", sc.GC_GENERATION: 2, sc.GC_COLLECTED: ANY,
                          sc.THREAD_NAME: "export-thread"})


def test_a_collection_on_a_thread_threading_did_not_start_makes_no_thread_object(start, monkeypatch):
    """A C library's thread (gRPC's, say) has no threading.Thread: asking threading for one inside the collection
    would make it under threading's own lock, which that thread may hold. Its ident names it instead."""
    import _thread
    import threading

    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("engine_core")
    done, idents = threading.Event(), []

    def foreign() -> None:
        idents.append(threading.get_ident())
        gc.collect()
        done.set()

    with _phase_span(st.rt, "Engine init"):
        _thread.start_new_thread(foreign, ())
        assert done.wait(30)
    st.rt.finish()
    # no _DummyThread was made for it (its ident may be reused by a thread started since: ours wait at ready)
    assert not [t for t in threading.enumerate() if t.ident == idents[0] and isinstance(t, threading._DummyThread)]
    (g,) = [s for s in st.spans(sc.GC_SPAN) if s.attributes[sc.GC_GENERATION] == 2]
    assert_attributes(g, {sc.PROCESS_KIND: "engine_core", sc.PHASE: "gc", sc.GC_GENERATION: 2, sc.GC_COLLECTED: ANY,
                          sc.THREAD_NAME: f"thread {idents[0]}"})


def test_a_collection_inside_a_bootstrap_segment_is_named_by_the_segment(start, monkeypatch):
    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("engine_core")
    gc.collect()  # the Imports segment is open: its span covers this time
    with _phase_span(st.rt, "Engine init"):
        pass
    st.rt.finish()
    assert st.spans(sc.IMPORTS_SPAN) and st.spans(sc.GC_SPAN) == []


def test_a_collection_in_a_process_that_never_began_a_phase_is_named_by_its_last_segment(start, monkeypatch):
    monkeypatch.setattr(retro_spans, "GC_MIN_NS", 0)
    st = start("engine_core")
    gc.collect()
    st.rt.finish(error=RuntimeError("failed during its imports"))
    assert st.spans(sc.GC_SPAN) == []


def test_a_slow_import_inside_a_phase_becomes_its_child_and_nested_imports_fold_into_it(start, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.setattr(retro_spans, "IMPORT_MIN_NS", 5_000_000)
    (tmp_path / "slow_outer_mod.py").write_text("import time, slow_inner_mod\ntime.sleep(0.01)\n")
    (tmp_path / "slow_inner_mod.py").write_text("import time\ntime.sleep(0.01)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    st = start("worker")
    with _phase_span(st.rt, "Sampler init") as phase:
        import slow_outer_mod  # noqa: F401
    (imp,) = st.spans(sc.IMPORT_SPAN)
    assert_attributes(imp, {sc.PROCESS_KIND: "worker", sc.PHASE: "module_import", sc.IMPORT_MODULE: "slow_outer_mod"})
    assert imp.parent.span_id == phase.get_span_context().span_id
    assert imp.end_time - imp.start_time >= 20_000_000
    sys.modules.pop("slow_outer_mod", None)
    sys.modules.pop("slow_inner_mod", None)


def test_imports_outside_any_phase_are_not_recorded(start, tmp_path, monkeypatch):
    monkeypatch.setattr(retro_spans, "IMPORT_MIN_NS", 0)
    (tmp_path / "bootstrap_mod.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    st = start("worker")
    import bootstrap_mod  # noqa: F401 - under the process span: that is the Imports segment's time
    assert st.spans(sc.IMPORT_SPAN) == []
    sys.modules.pop("bootstrap_mod", None)


def test_the_watchers_start_with_the_first_phase_and_see_nothing_of_the_imports_before_it(start, tmp_path,
                                                                                          monkeypatch):
    """While a process imports (thousands of modules and collections before its first phase) the watchers would
    record nothing: no phase span is current and the Imports segment names that time. They start with the first
    phase, and a slow import inside it is its child as before."""
    monkeypatch.setattr(retro_spans, "IMPORT_MIN_NS", 0)
    (tmp_path / "early_mod.py").write_text("x = 1\n")
    (tmp_path / "phase_mod.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    st = start("engine_core")
    retro = st.rt.retro
    import early_mod  # noqa: F401 - the Imports segment
    gc.collect()
    assert retro._gc not in gc.callbacks and (retro.imports, retro.gc_calls) == (0, 0)
    with _phase_span(st.rt, "Sampler init") as phase:
        import phase_mod  # noqa: F401
    assert retro._gc in gc.callbacks and retro.imports >= 1
    (imp,) = st.spans(sc.IMPORT_SPAN)
    assert_attributes(imp, {sc.PROCESS_KIND: "engine_core", sc.PHASE: "module_import", sc.IMPORT_MODULE: "phase_mod"})
    assert imp.parent.span_id == phase.get_span_context().span_id
    st.rt.finish()
    assert retro._gc not in gc.callbacks
    for name in ("early_mod", "phase_mod"):
        sys.modules.pop(name, None)


def test_cuda_init_is_traced_on_its_first_successful_call_only(start):
    torch_cuda = pytest.importorskip("torch.cuda")
    st = start("worker")
    if torch_cuda.is_available():
        pytest.skip("a CUDA build with a GPU: the stand-in below is for CPU builds")
    with pytest.raises((AssertionError, RuntimeError)):
        torch_cuda._lazy_init()  # a CPU build: "Torch not compiled with CUDA enabled"
    assert st.spans("CUDA init") == []  # a failed probe is no error of the start
    assert hasattr(torch_cuda._lazy_init, "__wrapped__")  # still watching for the call that succeeds


def test_a_once_hook_traces_the_outermost_first_success_only(start, monkeypatch):
    """torch re-enters _lazy_init while it initialises: one CUDA init span, for the outer call."""
    from vllm_otel_startup.agent.foundation.patch_points import PatchPoint
    from vllm_otel_startup.agent.patching.hooks import Installer

    mod = types.ModuleType("fake_cuda_mod")
    calls = []

    def lazy_init():
        calls.append(1)
        if len(calls) == 1:
            mod.lazy_init()  # re-entered while initialising (the module attribute is our wrapper)
            time.sleep(0.002)

    mod.lazy_init = lazy_init
    st = start("worker")
    inst = Installer(st.rt, st.rt.tracer, version="0.26.0")
    inst._apply_one(mod, PatchPoint("fake_cuda_mod:lazy_init", "CUDA init", "cuda_init", "any", hook="once"))
    mod.lazy_init()
    mod.lazy_init()
    (span,) = st.spans("CUDA init")
    assert span.end_time - span.start_time >= 2_000_000 and len(calls) == 3
    assert mod.lazy_init is lazy_init  # the original is back after the first success


def test_an_optional_import_that_fails_never_shows_our_frame(start):
    """vLLM and libraries log ImportErrors of optional imports with their traceback: it must end in the
    importer, never in this package (the watcher is compiled as part of importlib, whose frames CPython strips)."""
    import traceback

    start("worker").rt.close_segment(time.time_ns())  # its imports are over: the watchers start
    try:
        import definitely_not_a_module  # noqa: F401
    except ImportError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
    assert frames[-1].filename == __file__
    assert not [f for f in frames if "vllm_otel_startup" in f.filename]


def test_parts_left_out_for_an_overhead_measurement_are_not_there(start, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF (diagnostics): each part named is never installed, the rest of the start is."""
    torch_utils = pytest.importorskip("torch._dynamo.utils")
    from vllm_otel_startup import VllmStartupInstrumentor, diagnostics

    monkeypatch.setenv(diagnostics.OFF.name, "compile_stages,watchers,probes,span_resources")
    callbacks = list(gc.callbacks)
    st = start("worker")
    assert st.rt.retro is None and gc.callbacks == callbacks
    assert st.installer.compile_stages is None
    assert VllmStartupInstrumentor._probes.all == []
    with _phase_span(st.rt, "Loading (CPU)"), torch_utils.dynamo_timed("outer_region"):
        time.sleep(0.003)
    (phase,) = st.spans("Loading (CPU)")
    assert not st.spans("outer_region")
    assert sc.RES_CPU_TIME not in phase.attributes
    assert st.spans(sc.WORKER_PROCESS_SPAN) == [] and st.rt.process_span is not None  # the start itself goes on


def test_without_phase_spans_only_the_hooks_a_start_cannot_do_without_are_installed(start, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF=phase_spans (diagnostics): the children's identity at spawn, the ready point,
    failures, bootstrap segments and the CLI's exit stay; no row that only makes a phase span is wrapped."""
    from vllm_otel_startup import diagnostics
    from vllm_otel_startup.agent.patching import hooks

    st = start("worker")
    monkeypatch.setenv(diagnostics.OFF.name, "phase_spans,helper_env,compile_stages")
    monkeypatch.setattr(hooks.post_import, "register", lambda fn, module: fn(None))
    inst = hooks.Installer(st.rt, st.rt.tracer, version="0.26.0")
    applied: list = []
    monkeypatch.setattr(inst, "apply", lambda mod, pts: applied.extend(pts))
    inst.install()
    assert {p.hook for p in applied} == hooks.SKELETON_HOOKS == {"spawn", "ready", "guard", "marker", "cli_main"}
    assert not [p for p in applied if p.span == "Load weights"]


def test_the_agents_core_can_be_left_out_part_by_part(start, otel, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF=export_nudge,process_context,span_processor (diagnostics, to bisect the core):
    no export thread of ours, the process span is not the current span, the SDK provider keeps its own id generator
    and sampler and gets no span processor of ours; the process span is still made."""
    import threading

    from opentelemetry import trace

    from vllm_otel_startup import diagnostics
    from vllm_otel_startup.agent.export.processor import StartupSpanProcessor

    provider, _ = otel
    ids, sampler = provider.id_generator, provider.sampler
    before = {t.name for t in threading.enumerate()}
    monkeypatch.setenv(diagnostics.OFF.name, "export_nudge,process_context,span_processor")
    st = start("worker")
    assert st.rt.process_span is not None
    assert trace.get_current_span() is not st.rt.process_span
    assert provider.id_generator is ids and provider.sampler is sampler
    processors = provider._active_span_processor._span_processors  # the SDK's private tuple, as nudge.py reads it
    assert not [p for p in processors if isinstance(p, StartupSpanProcessor)]
    started = {t.name for t in threading.enumerate()} - before
    assert not [n for n in started if n.startswith("vllm-otel-startup-export")]


def test_a_child_can_be_left_without_hooks_or_without_the_agent(start, otel, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF=child_hooks: an EngineCore or worker registers no patch point (the API server
    still does); child_agent: an EngineCore or worker runs nothing of ours at all (diagnostics, to tell the API
    server's side of the agent from the child's)."""
    from vllm_otel_startup import VllmStartupInstrumentor, diagnostics
    from vllm_otel_startup.agent.foundation.process import ProcessInfo
    from vllm_otel_startup.agent.patching import hooks

    registered: list[str] = []
    monkeypatch.setattr(hooks.post_import, "register", lambda fn, module: registered.append(module))
    monkeypatch.setenv(diagnostics.OFF.name, "child_hooks")
    start("api_server")
    assert "vllm.entrypoints.cli.main" in registered
    VllmStartupInstrumentor().uninstrument()
    registered.clear()
    st = start("engine_core")
    assert registered == [] and st.rt.process_span is not None

    VllmStartupInstrumentor().uninstrument()
    monkeypatch.setenv(diagnostics.OFF.name, "child_agent")
    info = ProcessInfo(kind="worker", pid=os.getpid(), create_ns=time.time_ns(), create_source="proc",
                       hook_ns=time.time_ns(), argv=["python"])
    monkeypatch.setattr(ProcessInfo, "current", classmethod(lambda cls: info))
    VllmStartupInstrumentor().instrument(tracer_provider=otel[0], skip_dep_check=True)
    assert VllmStartupInstrumentor._runtime is None and registered == []


def test_a_childs_hooks_can_fire_and_wrap_nothing(start, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF=child_wrappers: an EngineCore's post-import hooks still run (wrapt's import finder
    stays) but wrap nothing; the API server's still wrap (diagnostics, to tell the finder from the wrappers)."""
    from vllm_otel_startup import VllmStartupInstrumentor, diagnostics
    from vllm_otel_startup.agent.foundation.patch_points import PatchPoint

    class Mod:
        @staticmethod
        def target() -> int:
            return 1

    point = PatchPoint("fake_mod:Mod.target", "Fake", "fake", "any")
    monkeypatch.setenv(diagnostics.OFF.name, "child_wrappers")
    original = vars(Mod)["target"]
    for kind, wrapped in (("engine_core", False), ("api_server", True)):
        st = start(kind)
        mod = types.SimpleNamespace(Mod=Mod)
        st.installer.apply(mod, [point])
        assert (vars(Mod)["target"] is not original) is wrapped, kind
        VllmStartupInstrumentor().uninstrument()
        assert vars(Mod)["target"] is original


def test_one_row_can_be_left_out_by_its_key(start, monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_OFF=row:TARGET: that patch point is not applied (status ``off``); the others are."""
    from vllm_otel_startup import diagnostics
    from vllm_otel_startup.agent.foundation.patch_points import PatchPoint

    class Mod:
        @staticmethod
        def left() -> int:
            return 1

        @staticmethod
        def kept() -> int:
            return 2

    monkeypatch.setenv(diagnostics.OFF.name, "watchers,row:fake_mod:Mod.left")
    st = start("engine_core")
    left, kept = vars(Mod)["left"], vars(Mod)["kept"]
    st.installer.apply(types.SimpleNamespace(Mod=Mod), [PatchPoint("fake_mod:Mod.left", "Left", "fake_left", "any"),
                                                        PatchPoint("fake_mod:Mod.kept", "Kept", "fake_kept", "any")])
    assert vars(Mod)["left"] is left and vars(Mod)["kept"] is not kept
    assert st.installer.status["fake_mod:Mod.left"] == "off"
    assert st.installer.status["fake_mod:Mod.kept"] == "applied"


def test_pytorchs_python_helpers_start_without_opentelemetrys_sitecustomize(start, monkeypatch):
    """torch builds its helpers' PYTHONPATH from the whole sys.path (Inductor's ISA probes, compile workers): the
    folder of OpenTelemetry's sitecustomize leaves it, every other entry stays; uninstrument() puts torch's back."""
    utils = pytest.importorskip("torch._inductor.utils")
    if not hasattr(utils, "python_subprocess_env"):
        pytest.skip("this torch builds its helpers' environment inline")
    import opentelemetry.instrumentation.auto_instrumentation as ai

    from vllm_otel_startup.agent.patching import helper_env

    folder = helper_env.otel_site_dir()
    assert folder == os.path.normcase(os.path.dirname(os.path.abspath(ai.__file__)))
    monkeypatch.setattr(sys, "path", [*sys.path, folder])  # as opentelemetry-instrument's PYTHONPATH puts it there
    original = utils.python_subprocess_env
    assert folder in original()["PYTHONPATH"].split(os.pathsep)
    st = start("worker")
    env = utils.python_subprocess_env()
    assert folder not in env["PYTHONPATH"].split(os.pathsep)
    assert env["PYTHONPATH"].split(os.pathsep) == [p for p in sys.path if p != folder]
    assert {k: v for k, v in env.items() if k != "PYTHONPATH"} == {k: v for k, v in original().items()
                                                                  if k != "PYTHONPATH"}
    st.installer.uninstall()
    assert utils.python_subprocess_env is original


def test_a_pythonpath_loses_only_that_folder():
    from vllm_otel_startup.agent.patching.helper_env import without

    sep = os.pathsep
    assert without(sep.join(["/a", "/otel/ai", "", "/b", "/otel/ai/"]), os.path.abspath("/otel/ai")) == sep.join(
        ["/a", "", "/b"])


def test_the_import_watcher_adds_no_call_for_a_module_already_loaded(start, tmp_path, monkeypatch):
    """``importlib.import_module`` of a loaded module (vLLM's capture does it a few times per CUDA graph) runs no call
    of ours: on Python 3.11 it returns from the wrapper's own frame; on >= 3.12 the watchers (this one and the
    post-import hooks) watch ``_find_and_load_unlocked``, which such a call never reaches (issue 25: every callback is
    a frame one level deeper than its caller, on CPython's data-stack chunks); a new module is watched."""
    import importlib
    import json as loaded

    st = start("engine_core")
    st.rt.close_segment(time.time_ns())  # its imports are over: the watchers start
    retro = st.rt.retro
    before = retro.imports
    assert importlib.import_module("json") is loaded
    assert retro.imports == before
    before = retro.imports
    (tmp_path / "vos_fresh_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.import_module("vos_fresh_module").X == 1
    assert retro.imports == before + 1


def test_an_import_that_fails_inside_a_slow_one_leaves_the_outer_ones_span(start, tmp_path, monkeypatch):
    """A failed optional import reports no return (frameless watcher: its entry is dropped at the next import); the
    slow import around it, and the next one, still get their spans."""
    monkeypatch.setattr(retro_spans, "IMPORT_MIN_NS", 5_000_000)
    (tmp_path / "slow_with_optional.py").write_text(
        "import time\ntry:\n    import vos_missing_optional\nexcept ImportError:\n    pass\ntime.sleep(0.01)\n")
    (tmp_path / "slow_after.py").write_text("import time\ntime.sleep(0.01)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    st = start("worker")
    with _phase_span(st.rt, "Sampler init"):
        with pytest.raises(ImportError):
            import vos_missing_at_top  # noqa: F401
        import slow_after  # noqa: F401
        import slow_with_optional  # noqa: F401
    names = sorted(s.attributes[sc.IMPORT_MODULE] for s in st.spans(sc.IMPORT_SPAN))
    assert names == ["slow_after", "slow_with_optional"]
    for mod in ("slow_with_optional", "slow_after"):
        sys.modules.pop(mod, None)
