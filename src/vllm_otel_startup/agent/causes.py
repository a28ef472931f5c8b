"""Cause probes: the attributes that explain a phase's cost.

Two kinds, both fail-soft (a probe that fails only loses its attributes):
  CALL_PROBES[name](rt, span, instance, args, kwargs, result)  after a patched call returns; ``span`` is
      our span for that call, or None when the call is not ours (enrich hooks): then the probe records
      pending attributes for the phase's span instead.
  PHASE_PROBES[phase] = (on_start(rt, span), on_ending(rt, span))  around any span of that phase, native
      or ours, from the span processor.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.process import redact_url

if TYPE_CHECKING:
    from vllm_otel_startup.agent.runtime import Runtime


def _arg(args: tuple, kwargs: dict, index: int, name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else None


def _config_facts(vllm_config: Any) -> dict[str, Any]:
    mc = getattr(vllm_config, "model_config", None)
    pc = getattr(vllm_config, "parallel_config", None)
    cc = getattr(vllm_config, "compilation_config", None)
    dc = getattr(vllm_config, "device_config", None)
    facts: dict[str, Any] = {}
    if mc is not None:
        facts[sc.MODEL] = redact_url(str(getattr(mc, "model", "")))  # e.g. s3://key:secret@bucket/...
        served = getattr(mc, "served_model_name", None)
        if served:
            facts[sc.SERVED_MODEL_NAME] = redact_url(str(served if isinstance(served, str) else served[0]))
        facts[sc.DTYPE] = str(getattr(mc, "dtype", "")).replace("torch.", "")
        facts[sc.ENFORCE_EAGER] = bool(getattr(mc, "enforce_eager", False))
        if getattr(mc, "max_model_len", None) is not None:
            facts[sc.MAX_MODEL_LEN] = int(mc.max_model_len)
    if pc is not None:
        facts[sc.TP_SIZE] = int(getattr(pc, "tensor_parallel_size", 1))
        facts[sc.PP_SIZE] = int(getattr(pc, "pipeline_parallel_size", 1))
        facts[sc.DP_SIZE] = int(getattr(pc, "data_parallel_size", 1))
    if cc is not None:
        mode = getattr(cc, "mode", getattr(cc, "level", None))
        if mode is not None:
            facts[sc.COMPILATION_MODE] = getattr(mode, "name", str(mode))
        sizes = getattr(cc, "cudagraph_capture_sizes", None)
        if sizes is not None:
            facts[sc.CUDAGRAPH_CAPTURE_SIZES] = len(sizes)
    if dc is not None and getattr(dc, "device_type", None):
        facts[sc.DEVICE] = str(dc.device_type)
    return facts


def config(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    facts = _config_facts(result)
    rt.facts.update(facts)
    if span is not None:
        span.set_attributes(facts)


SUBPROCESS_SPAN = "Model inspection subprocess"


def model_inspection(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """A cache hit is an inspection that needed no subprocess (its child span) since it began."""
    if span is not None:
        began = span.start_time or 0
        miss = any(name == SUBPROCESS_SPAN and start >= began for start, _, name, *_ in list(rt.local))
        span.set_attribute(sc.MODEL_INSPECTION_CACHE_HIT, not miss)


def kv_cache_profile(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    if span is not None and isinstance(result, int):
        span.set_attribute(sc.KV_CACHE_BYTES, result)


def prepare_weights(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """DefaultModelLoader._prepare_weights(model_name_or_path, ...) -> (folder, files, use_safetensors)."""
    model = _arg(args, kwargs, 0, "model_name_or_path")
    files = list(result[1]) if isinstance(result, tuple) and len(result) > 1 else []
    total = fresh = 0
    for f in files:
        try:
            st = os.stat(f)  # follows hub-cache symlinks to the blob
        except OSError:
            continue
        total += st.st_size
        if st.st_mtime_ns >= rt.info.create_ns:  # written during this start: downloaded now
            fresh += st.st_size
    source = "local_dir" if model and os.path.isdir(str(model)) else ("hub_download" if fresh else "hub_cache")
    attrs: dict[str, Any] = {sc.WEIGHTS_SOURCE: source, sc.WEIGHTS_FILES: len(files), sc.WEIGHTS_BYTES: total}
    if source == "hub_download":
        attrs[sc.DOWNLOAD_BYTES] = fresh
    lc = getattr(instance, "load_config", None)
    if lc is not None and getattr(lc, "load_format", None) is not None:
        attrs[sc.WEIGHTS_LOAD_FORMAT] = str(getattr(lc.load_format, "value", lc.load_format))
    prev = rt.pending.get("weights_load", {})
    for key in (sc.WEIGHTS_BYTES, sc.WEIGHTS_FILES, sc.DOWNLOAD_BYTES):  # several sources add up
        if key in prev and key in attrs:
            attrs[key] += prev[key]
    rt.add_pending("weights_load", attrs)


def aot_load(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """_try_load_aot_compiled_fn(model, aot_compilation_path) -> the loaded function or None (compile again).
    The reason of a failed load was set by the monitor it opens (hooks._SpanContextManager)."""
    if span is None:
        return
    path = _arg(args, kwargs, 1, "aot_compilation_path")
    size = _file_size(path)
    if size is not None:
        span.set_attribute(sc.COMPILE_AOT_BYTES, size)
    span.set_attribute(sc.COMPILE_AOT_LOADED, result is not None)
    if result is None and sc.COMPILE_AOT_LOAD_ERROR not in (span.attributes or {}):
        span.set_attribute(sc.COMPILE_AOT_LOAD_ERROR, "FileNotFoundError: no AOT artifact yet" if size is None
                           else "not loaded (no reason given)")


def aot_save(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """AOTCompiledFunction.save_compiled_function(path): the artifact's size."""
    size = _file_size(_arg(args, kwargs, 0, "path"))
    if span is not None and size is not None:
        span.set_attribute(sc.COMPILE_AOT_BYTES, size)


def _file_size(path: Any) -> int | None:
    try:
        return os.path.getsize(os.fspath(path)) if path is not None else None
    except (OSError, TypeError):
        return None


def capture(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """capture_model() -> bytes the graphs took (vLLM's own figure); the V2 runner's batch shapes per mode."""
    if span is None:
        return
    if isinstance(result, int) and not isinstance(result, bool):
        span.set_attribute(sc.CUDAGRAPH_MEMORY, result)
    descs = getattr(getattr(instance, "cudagraph_manager", None), "_capture_descs", None)
    if isinstance(descs, dict):
        for mode, shapes in descs.items():
            key = {"FULL": sc.CUDAGRAPH_SHAPES_FULL, "PIECEWISE": sc.CUDAGRAPH_SHAPES_PIECEWISE}.get(
                getattr(mode, "name", str(mode)))
            if key and hasattr(shapes, "__len__"):
                span.set_attribute(key, len(shapes))


def capture_mode(rt: Runtime, span: Any, instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """_capture_cudagraphs(batch_descriptors, cudagraph_runtime_mode): one runtime mode's batch shapes."""
    if span is None:
        return
    mode = _arg(args, kwargs, 1, "cudagraph_runtime_mode")
    shapes = _arg(args, kwargs, 0, "batch_descriptors")
    if mode is not None:
        span.set_attribute(sc.CUDAGRAPH_MODE, str(getattr(mode, "name", mode)))
    if hasattr(shapes, "__len__"):
        span.set_attribute(sc.CUDAGRAPH_SHAPES, len(shapes))


CALL_PROBES: dict[str, Callable[..., None]] = {
    "capture": capture,
    "capture_mode": capture_mode,
    "aot_load": aot_load,
    "aot_save": aot_save,
    "config": config,
    "model_inspection": model_inspection,
    "kv_cache_profile": kv_cache_profile,
    "prepare_weights": prepare_weights,
}


# ---- phase probes (processor side) ----------------------------------------------------------------
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


def count_calls(rt: Runtime, module: str, qualname: str, key: str) -> bool:
    """Count calls of ``module:qualname`` into ``rt.counters[key]`` from now on, in this process only.
    Installed lazily, once, by the phase that needs it (the module is loaded by then); False if absent."""
    installed: dict[str, bool] = rt.__dict__.setdefault("call_counters", {})
    if key not in installed:
        installed[key] = False
        mod = sys.modules.get(module)
        owner = getattr(mod, qualname.split(".")[0], None) if mod is not None else None
        if owner is not None and hasattr(owner, qualname.split(".")[-1]):
            import wrapt

            def counted(wrapped, instance, args, kwargs):
                rt.count(key)
                return wrapped(*args, **kwargs)

            wrapt.wrap_function_wrapper(mod, qualname, counted)
            installed[key] = True
    return installed[key]


def _compile_start(rt: Runtime, span: Any) -> None:
    if "torch._inductor.cpp_builder" not in sys.modules:
        with contextlib.suppress(Exception):
            import torch._inductor.cpp_builder  # noqa: F401 - torch is loaded: this process is compiling
    # CppBuilder.build runs only when generated C++ is not in Inductor's cache
    count_calls(rt, "torch._inductor.cpp_builder", "CppBuilder.build", "cpp_builds")
    rt.compile_snapshot = (_torch_counters(), rt.counters.get("cpp_builds", 0))  # type: ignore[attr-defined]


def _compile_ending(rt: Runtime, span: Any) -> None:
    before, cpp_before = getattr(rt, "compile_snapshot", (None, 0))
    after = _torch_counters()
    if before is None or after is None:
        return
    d = {k: after[k] - before[k] for k in after}
    fx_hits, fx_misses = d[("inductor", "fxgraph_cache_hit")], d[("inductor", "fxgraph_cache_miss")]
    cpp = rt.counters.get("cpp_builds", 0) - cpp_before
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


def _weights_ending(rt: Runtime, span: Any) -> None:
    attrs = span.attributes or {}
    nbytes = attrs.get(sc.WEIGHTS_BYTES)
    start = getattr(span, "start_time", None)
    if nbytes and start:
        import time

        seconds = (time.time_ns() - start) / 1e9
        if seconds > 0:
            span.set_attribute(sc.WEIGHTS_GBPS, round(nbytes / seconds / 1e9, 4))


def _capture_start(rt: Runtime, span: Any) -> None:
    # in the process that captures, when its capture span starts: torch.cuda is never touched elsewhere
    count_calls(rt, "torch.cuda.graphs", "CUDAGraph.capture_begin", "cudagraphs")
    rt.graphs_before = rt.counters.get("cudagraphs", 0)  # type: ignore[attr-defined]


def _capture_ending(rt: Runtime, span: Any) -> None:
    if rt.__dict__.get("call_counters", {}).get("cudagraphs"):
        span.set_attribute(sc.CUDAGRAPH_COUNT, rt.counters.get("cudagraphs", 0) - getattr(rt, "graphs_before", 0))


PHASE_PROBES: dict[str, tuple[Callable[[Runtime, Any], None] | None, Callable[[Runtime, Any], None] | None]] = {
    "torch_compile": (_compile_start, _compile_ending),
    "weights_load": (None, _weights_ending),
    "cudagraph_capture": (_capture_start, _capture_ending),
}
