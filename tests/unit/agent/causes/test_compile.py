"""agent/causes/compile.py: the torch.compile cause probes on stand-in spans and a stand-in torch. The AOT
artifact's load says whether it loaded, its size and why not (no artifact yet is not a failed load); its save, its
size; the compile span gets PyTorch's cache counters and C++ builds of its own duration and whether the cache hit
(FX-graph cache on the GPU path; no C++ compiler run on the CPU path); the backend's key never overrides the AOT
key. (Compile-cache keys themselves: tests/unit/agent/causes/test_compile_key.py.)"""

from __future__ import annotations

import collections
import sys
import types

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call
from vllm_otel_startup.agent.causes.compile import AotLoad, AotSave, CompileCache, CompileKey


class _Span:
    def __init__(self, **attrs) -> None:
        self.attributes = dict(attrs)

    def set_attribute(self, k, v) -> None:
        self.attributes[k] = v

    def set_attributes(self, attrs) -> None:
        self.attributes.update(attrs)


class _Rt:
    def __init__(self) -> None:
        self.pending: dict[str, dict] = {}

    def add_pending(self, phase: str, attrs: dict) -> None:
        self.pending.setdefault(phase, {}).update(attrs)


def _load(span, path, result) -> None:
    AotLoad().after_call(_Rt(), span, Call(None, (None, path), {}, result))  # no model: no key to record


def test_a_loaded_artifact_has_its_size_and_no_error(tmp_path):
    (tmp_path / "model.aot").write_bytes(b"x" * 123)
    span = _Span()
    _load(span, str(tmp_path / "model.aot"), result=object())
    assert span.attributes == {sc.COMPILE_AOT_BYTES: 123, sc.COMPILE_AOT_LOADED: True}


def test_no_artifact_yet_is_said_so_and_a_reason_vllm_gave_is_kept(tmp_path):
    first = _Span()
    _load(first, str(tmp_path / "absent.aot"), result=None)
    assert first.attributes == {sc.COMPILE_AOT_LOADED: False,
                                sc.COMPILE_AOT_LOAD_ERROR: "FileNotFoundError: no AOT artifact yet"}
    (tmp_path / "model.aot").write_bytes(b"x")
    unexplained = _Span()
    _load(unexplained, str(tmp_path / "model.aot"), result=None)
    assert unexplained.attributes[sc.COMPILE_AOT_LOAD_ERROR] == "not loaded (no reason given)"
    given = _Span(**{sc.COMPILE_AOT_LOAD_ERROR: "RuntimeError: bad magic"})
    _load(given, str(tmp_path / "model.aot"), result=None)
    assert given.attributes[sc.COMPILE_AOT_LOAD_ERROR] == "RuntimeError: bad magic"


def test_a_call_that_is_not_ours_records_nothing():
    AotLoad().after_call(_Rt(), None, Call(None, (), {}, None))  # an enrich row's call: no span, nothing to do


def test_a_saved_artifacts_size(tmp_path):
    (tmp_path / "a.aot").write_bytes(b"y" * 7)
    span = _Span()
    AotSave().after_call(_Rt(), span, Call(None, (str(tmp_path / "a.aot"),), {}, None))
    assert span.attributes == {sc.COMPILE_AOT_BYTES: 7}


def test_the_aot_key_governs_the_compile_that_follows():
    rt = _Rt()
    rt.pending["torch_compile"] = {sc.COMPILE_CACHE_KEY: "aot-key"}
    CompileKey().after_call(rt, None, Call(object(), (), {}, None))  # would need a VllmBackend: never read
    assert rt.pending == {"torch_compile": {sc.COMPILE_CACHE_KEY: "aot-key"}}


@pytest.fixture
def torch_stand_in(monkeypatch):
    counters = collections.defaultdict(collections.Counter)
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(counters=counters))

    class CppBuilder:
        def build(self):
            return "lib.so"

    builder = types.ModuleType("torch._inductor.cpp_builder")
    builder.CppBuilder = CppBuilder
    monkeypatch.setitem(sys.modules, "torch._inductor.cpp_builder", builder)
    return counters, CppBuilder


def test_the_cpu_path_hits_when_no_cpp_build_ran_during_the_span(torch_stand_in, monkeypatch):
    counters, builder = torch_stand_in
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/cache/inductor")
    counters["stats"]["unique_graphs"] = 5  # before the span: not this span's
    probe, span = CompileCache(), _Span()
    try:
        probe.on_start(None, span)
        counters["stats"]["unique_graphs"] += 2
        probe.on_ending(None, span)
        assert span.attributes == {
            sc.COMPILE_FX_HITS: 0, sc.COMPILE_FX_MISSES: 0, sc.COMPILE_AUTOGRAD_HITS: 0,
            sc.COMPILE_AUTOGRAD_MISSES: 0, sc.COMPILE_UNIQUE_GRAPHS: 2, sc.COMPILE_CPP_BUILDS: 0,
            sc.COMPILE_CACHE_HIT: True, sc.COMPILE_CACHE_DIR: "/cache/inductor"}
        cold = _Span()
        probe.on_start(None, cold)
        counters["stats"]["unique_graphs"] += 1
        builder().build()
        probe.on_ending(None, cold)
        assert cold.attributes[sc.COMPILE_CPP_BUILDS] == 1 and cold.attributes[sc.COMPILE_CACHE_HIT] is False
    finally:
        probe.uninstall()


def test_the_gpu_path_hits_when_the_fx_graph_cache_never_missed(torch_stand_in, monkeypatch):
    counters, _ = torch_stand_in
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    probe, span = CompileCache(), _Span()
    try:
        probe.on_start(None, span)
        counters["inductor"]["fxgraph_cache_hit"] += 3
        counters["inductor"]["fxgraph_cache_miss"] += 1
        probe.on_ending(None, span)
        assert span.attributes[sc.COMPILE_FX_HITS] == 3 and span.attributes[sc.COMPILE_CACHE_HIT] is False
        assert sc.COMPILE_CACHE_DIR not in span.attributes
    finally:
        probe.uninstall()


def test_without_torchs_counters_the_span_gets_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "torch._inductor.cpp_builder", types.ModuleType("torch._inductor.cpp_builder"))
    probe, span = CompileCache(), _Span()
    probe.on_start(None, span)
    probe.on_ending(None, span)
    assert span.attributes == {}
