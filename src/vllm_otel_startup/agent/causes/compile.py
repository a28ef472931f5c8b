"""Cause probes of torch.compile: the AOT artifact's load and save (AotLoad, AotSave), vLLM's compile-cache key
and its factors (CompileKey, AotLoad, through compile_key.py), and PyTorch's cache counters and C++ builds
during the compile span (CompileCache)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call, Probe, ProbeHost, _file_size, span_attributes
from vllm_otel_startup.agent.causes.call_counter import CallCounter
from vllm_otel_startup.agent.foundation.guard import SPANS, failed


class AotLoad(Probe):
    """_try_load_aot_compiled_fn(model, aot_compilation_path) -> the loaded function or None (compile again).
    The reason of a failed load was set by the monitor it opens (wrappers.SpanContextManager). Before it,
    aot_compile_hash_factors(vllm_config) returns the factors vLLM hashes into the AOT key: kept here for the load."""

    names = ("aot_load", "aot_key_factors")

    def __init__(self) -> None:
        self.factors: list[Any] = []  # the last aot_compile_hash_factors() result in this process

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if call.kind == "aot_key_factors":
            self.factors = list(call.result) if isinstance(call.result, list) else []
            return
        if span is None:
            return
        size = _file_size(call.arg(1, "aot_compilation_path"))
        if size is not None:
            span.set_attribute(sc.COMPILE_AOT_BYTES, size)
        span.set_attribute(sc.COMPILE_AOT_LOADED, call.result is not None)
        if call.result is None and sc.COMPILE_AOT_LOAD_ERROR not in span_attributes(span):
            span.set_attribute(sc.COMPILE_AOT_LOAD_ERROR, "FileNotFoundError: no AOT artifact yet" if size is None
                               else "not loaded (no reason given)")
        model, path = call.arg(0, "model"), call.arg(1, "aot_compilation_path")
        if model is not None and path:
            from vllm_otel_startup.agent.causes import (
                compile_key,  # the AOT key: on this span and the compile that follows
            )

            try:  # vLLM internals a release may lack: only the key's attributes are lost
                key = compile_key.record_aot(model, str(path), self.factors)
            except Exception:  # noqa: BLE001
                failed(SPANS, "compile key (AOT)")
                return
            span.set_attributes(key)
            if call.result is None:
                rt.add_pending("torch_compile", key)


class AotSave(Probe):
    """AOTCompiledFunction.save_compiled_function(path): the artifact's size."""

    name = "aot_save"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        size = _file_size(call.arg(0, "path"))
        if span is not None and size is not None:
            span.set_attribute(sc.COMPILE_AOT_BYTES, size)


class CompileKey(Probe):
    """VllmBackend.__call__ (inside torch.compile): vLLM's cache key, its factor hashes and per-factor digests
    (compile_key.py), pending for the torch.compile span."""

    name = "compile_key"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        from vllm_otel_startup.agent.causes import compile_key  # lazy: only a compiling process gets here

        if sc.COMPILE_CACHE_KEY in rt.pending.get("torch_compile", {}):
            return  # the AOT key (recorded at the AOT load) governs this compile; the backend's is inside it
        rt.add_pending("torch_compile", compile_key.record(call.instance))


_COMPILE_COUNTERS = (
    ("inductor", "fxgraph_cache_hit"),
    ("inductor", "fxgraph_cache_miss"),
    ("aot_autograd", "autograd_cache_hit"),
    ("aot_autograd", "autograd_cache_miss"),
    ("stats", "unique_graphs"),
)


def _torch_counters() -> dict[tuple[str, str], int] | None:
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if counters is None:
        return None
    return {(g, k): int(counters[g][k]) for g, k in _COMPILE_COUNTERS}


class CompileCache(Probe):
    """torch.compile: PyTorch's cache counters and the C++ builds (CPU path) during the compile span."""

    phase = "torch_compile"

    def __init__(self) -> None:
        # CppBuilder.build runs only when generated C++ is not in Inductor's cache
        self.cpp_builds = CallCounter("torch._inductor.cpp_builder", "CppBuilder.build")
        self.before: tuple[dict[tuple[str, str], int] | None, int] = (None, 0)

    def on_start(self, rt: ProbeHost, span: Any) -> None:
        if "torch._inductor.cpp_builder" not in sys.modules:
            with contextlib.suppress(Exception):
                import torch._inductor.cpp_builder  # noqa: F401 - torch is loaded: this process is compiling
        self.cpp_builds.install()
        self.before = (_torch_counters(), self.cpp_builds.count)

    def on_ending(self, rt: ProbeHost, span: Any) -> None:
        before, cpp_before = self.before
        after = _torch_counters()
        if before is None or after is None:
            return
        d = {k: after[k] - before[k] for k in after}
        fx_hits, fx_misses = d[("inductor", "fxgraph_cache_hit")], d[("inductor", "fxgraph_cache_miss")]
        cpp = self.cpp_builds.count - cpp_before
        graphs = d[("stats", "unique_graphs")]
        span.set_attributes({
            sc.COMPILE_FX_HITS: fx_hits,
            sc.COMPILE_FX_MISSES: fx_misses,
            sc.COMPILE_AUTOGRAD_HITS: d[("aot_autograd", "autograd_cache_hit")],
            sc.COMPILE_AUTOGRAD_MISSES: d[("aot_autograd", "autograd_cache_miss")],
            sc.COMPILE_UNIQUE_GRAPHS: graphs,
            sc.COMPILE_CPP_BUILDS: cpp,
        })
        if fx_hits or fx_misses:  # Inductor's FX-graph cache decided (GPU / Triton path)
            span.set_attribute(sc.COMPILE_CACHE_HIT, fx_misses == 0)
        elif graphs:  # CPU path: generated C++ came from the cache iff the compiler never ran
            span.set_attribute(sc.COMPILE_CACHE_HIT, cpp == 0)
        cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        if cache_dir:
            span.set_attribute(sc.COMPILE_CACHE_DIR, cache_dir)

    def uninstall(self) -> None:
        self.cpp_builds.uninstall()
