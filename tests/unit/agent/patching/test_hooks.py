"""vLLM's own spans are recognized by what vLLM's @instrument wrapper is, wherever vLLM keeps its tracing module
(FAKE module trees from the real-wheel inventory, tests/unit/fake_vllm.py): the old vllm/tracing layout, vLLM
main's vllm/foundation/observability/tracing, and a made-up third place; look-alikes are not taken for it."""

from __future__ import annotations

import importlib
import sys
import textwrap

import fake_vllm
import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from spans import assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.patching.hooks import is_native, native_span

LOADER = "vllm.model_executor.model_loader.default_loader"
TARGET = f"{LOADER}:DefaultModelLoader.load_weights"
ELSEWHERE = "vllm.o11y.spans"  # not a path ending in tracing/otel.py


def _load_weights():
    return importlib.import_module(LOADER).DefaultModelLoader


@pytest.mark.parametrize("where", [fake_vllm.OLD_TRACING, fake_vllm.NEW_TRACING, ELSEWHERE])
def test_native_wrapper_is_recognized_wherever_vllms_tracing_lives(tmp_path, monkeypatch, where):
    root = fake_vllm.write_tree(tmp_path / "t", "0.32.0", tracing=where)
    fake_vllm.purge()
    monkeypatch.syspath_prepend(str(root))
    try:
        fn = vars(_load_weights())["load_weights"]
        assert fn.__code__.co_filename.replace("\\", "/").endswith(where.replace(".", "/") + "/otel.py")
        assert native_span(fn) == "Load weights"
        assert is_native(fn)
        assert native_span(fn.__wrapped__) is None  # vLLM's undecorated function
        if where == fake_vllm.NEW_TRACING:  # vllm.tracing is main's alias of the new package
            assert importlib.import_module("vllm.tracing") is sys.modules[fake_vllm.NEW_TRACING]
    finally:
        fake_vllm.purge()


@pytest.mark.parametrize("where", [fake_vllm.NEW_TRACING, ELSEWHERE])
def test_moved_tracing_module_adopts_vllms_span_without_a_duplicate(start, tmp_path, monkeypatch, where):
    """The start fixture's tree, then the same release re-written with the tracing package moved."""
    s = start("worker", "0.32.0")
    root = fake_vllm.write_tree(tmp_path / "moved", "0.32.0", tracing=where)
    fake_vllm.purge()
    monkeypatch.syspath_prepend(str(root))
    _load_weights()().load_weights()
    [weights] = s.spans("Load weights")  # vLLM's only
    assert weights.instrumentation_scope.name != sc.INSTRUMENTATION_NAME
    assert_attributes(weights, {sc.PROCESS_KIND: "worker", sc.PHASE: "weights_load", sc.NATIVE: True})
    assert s.installer.status[TARGET] == "native"
    # a ready point that vLLM traces keeps its side effect (this process's start ends), with vLLM's span only
    importlib.import_module("vllm.v1.worker.gpu_worker").Worker().compile_or_warm_up_model()
    [warmup] = s.spans("Warmup (GPU)")
    assert_attributes(warmup, {sc.PROCESS_KIND: "worker", sc.PHASE: "warmup", sc.NATIVE: True})
    assert s.rt.done


DECOY_OTEL = '''
import functools
from opentelemetry import trace

def traced(func):  # another library's tracing decorator, in a file that ends with tracing/otel.py
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with trace.get_tracer("decoylib").start_as_current_span("decoy " + func.__name__):
            return func(*args, **kwargs)
    return wrapper
'''

VLLM_PLAIN = '''
import functools
from opentelemetry import trace  # imported, but this decorator opens no span

def deprecate_kwargs(func):  # a vLLM decorator that is not tracing
    @functools.wraps(func)
    def inner(*args, **kwargs):
        trace.get_current_span()
        return func(*args, **kwargs)
    return inner
'''


def _decorate_in_tree(root, wrap_line: str) -> None:
    """Re-decorate the fake release's DefaultModelLoader.load_weights at the end of its module."""
    path = root.joinpath(*LOADER.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + "\n" + wrap_line + "\n")


def _decoys(root) -> None:
    (root / "decoylib" / "tracing").mkdir(parents=True)
    (root / "decoylib" / "__init__.py").write_text("")
    (root / "decoylib" / "tracing" / "__init__.py").write_text("")
    (root / "decoylib" / "tracing" / "otel.py").write_text(DECOY_OTEL)
    (root / "vllm" / "decorators_fake.py").write_text(VLLM_PLAIN)


@pytest.mark.parametrize(("wrap_line", "name"), [
    ("from decoylib.tracing.otel import traced\n"
     "DefaultModelLoader.load_weights = traced(DefaultModelLoader.load_weights)", "another library's tracer"),
    ("from vllm.decorators_fake import deprecate_kwargs\n"
     "DefaultModelLoader.load_weights = deprecate_kwargs(DefaultModelLoader.load_weights)", "a vLLM non-tracer"),
])
def test_look_alikes_are_not_vllms_span_and_ours_is_kept(start, tmp_path, monkeypatch, wrap_line, name):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "frameless")  # Python >= 3.12: our wrapper, to look at
    root = tmp_path / "fake-0.10.1"  # the start fixture's tree: 0.10.1 traces nothing itself
    s = start("worker", "0.10.1")
    _decoys(root)
    _decorate_in_tree(root, wrap_line)
    raw = vars(_load_weights())["load_weights"]
    assert hasattr(raw, "__wrapped__")
    if "decoylib" in wrap_line:  # the old file-name check would have taken it for vLLM's
        wrapper = raw.__wrapped__  # ours (wrapt) around the decoy
        assert wrapper.__code__.co_filename.replace("\\", "/").endswith("tracing/otel.py")
        assert native_span(wrapper) is None
    _load_weights()().load_weights()
    assert s.installer.status[TARGET] == "applied", name
    [ours] = s.spans("Load weights")
    assert ours.instrumentation_scope.name == sc.INSTRUMENTATION_NAME and sc.NATIVE not in ours.attributes


def test_a_foreign_decorator_on_top_of_vllms_is_looked_through(start, tmp_path):
    root = tmp_path / "fake-0.32.0"
    s = start("worker", "0.32.0")
    _decoys(root)
    _decorate_in_tree(root, "from vllm.decorators_fake import deprecate_kwargs\n"
                            "DefaultModelLoader.load_weights = deprecate_kwargs(DefaultModelLoader.load_weights)")
    _load_weights()().load_weights()
    assert s.installer.status[TARGET] == "native"
    [weights] = s.spans("Load weights")
    assert_attributes(weights, {sc.PROCESS_KIND: "worker", sc.PHASE: "weights_load", sc.NATIVE: True})


def test_a_span_name_vllm_renamed_is_adopted_under_the_rows_phase(start, tmp_path):
    root = tmp_path / "fake-0.32.0"
    s = start("worker", "0.32.0")
    _decorate_in_tree(root, "DefaultModelLoader.load_weights = instrument(span_name='Weights loading')("
                            "DefaultModelLoader.load_weights.__wrapped__)")
    _load_weights()().load_weights()
    assert s.installer.status[TARGET] == "native"
    assert s.spans("Load weights") == []  # no second span of ours
    [renamed] = s.spans("Weights loading")
    assert_attributes(renamed, {sc.PROCESS_KIND: "worker", sc.PHASE: "weights_load", sc.NATIVE: True})


def test_vllms_spans_going_to_another_provider_keep_ours(start, otel):
    """vLLM's wrapper uses the global tracer provider: if that is not the one we were given, its span cannot be
    adopted, so our own span is kept."""
    s = start("worker", "0.32.0")
    elsewhere = InMemorySpanExporter()
    other = TracerProvider()
    other.add_span_processor(SimpleSpanProcessor(elsewhere))
    trace_api._TRACER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001 - test isolation, as the otel fixture does
    trace_api._TRACER_PROVIDER = None  # noqa: SLF001
    trace_api.set_tracer_provider(other)
    _load_weights()().load_weights()
    assert s.installer.status[TARGET] == "applied"
    [ours] = s.spans("Load weights")
    assert ours.instrumentation_scope.name == sc.INSTRUMENTATION_NAME
    assert [sp.name for sp in elsewhere.get_finished_spans()] == ["Load weights"]  # vLLM's, in the other one


def test_odd_objects_are_not_native():
    class Weird:
        __wrapped__ = property(lambda self: 1 / 0)

    for obj in (None, 1, "x", len, Weird(), type("C", (), {"__wrapped__": len})()):
        assert native_span(obj) is None


def test_a_wrapper_with_opentelemetry_in_its_globals_but_not_in_vllm_is_rejected():
    ns: dict = {"__name__": "mylib.tracing.otel"}
    exec(textwrap.dedent(DECOY_OTEL), ns)  # noqa: S102 - a test-local decorator

    @ns["traced"]
    def f():
        return 1

    assert native_span(f) is None
    ns2: dict = {"__name__": "vllm.some.tracing"}
    exec(textwrap.dedent(DECOY_OTEL), ns2)  # noqa: S102 - the same decorator defined in a vllm module

    @ns2["traced"]
    def g():
        return 1

    assert native_span(g) == ""  # vLLM-defined, opens an OpenTelemetry span: native (its name not in a cell)


def test_vllms_nested_worker_init_spans_get_two_names(start):
    """vLLM >= 0.16 traces WorkerProc.__init__ and, inside it, WorkerWrapperBase.init_worker, both as `Worker init`:
    the inner one becomes `Worker construction` (same phase), so no span sits inside one of its own name; a lone
    `Worker init` (the EngineCore's in-process worker) keeps vLLM's name."""
    s = start("worker", "0.32.0")
    tracer = trace_api.get_tracer("vllm.worker")  # vLLM's own tracer, not ours
    with tracer.start_as_current_span(sc.WORKER_INIT_SPAN), tracer.start_as_current_span(sc.WORKER_INIT_SPAN):
        pass
    with tracer.start_as_current_span(sc.WORKER_INIT_SPAN):
        pass
    inner, outer, lone = s.spans()[-3:]
    assert (inner.name, outer.name, lone.name) == (sc.WORKER_CONSTRUCTION_SPAN, sc.WORKER_INIT_SPAN,
                                                   sc.WORKER_INIT_SPAN)
    assert inner.parent.span_id == outer.context.span_id
    for x in (inner, outer, lone):
        assert_attributes(x, {sc.PROCESS_KIND: "worker", sc.PHASE: "worker_init", sc.NATIVE: True})
