"""Cause probes: the attributes that explain a phase's cost.

A probe is a small object that keeps its own state; :class:`Probes` holds one of each per process and
invokes them fail-soft (a probe that fails only loses its attributes):
  after_call(rt, span, call)   after a patched call returns (the patch table's ``probe`` names it); ``span``
      is our span for that call, or None when the call is not ours (enrich hooks): then the probe records
      pending attributes for the phase's span instead.
  on_start(rt, span) / on_ending(rt, span)   around any span of the probe's ``phase``, native or ours, from
      the span processor (``on_ending`` runs while the span is still writable).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.call_counter import CallCounter
from vllm_otel_startup.agent.guard import SPANS, failed
from vllm_otel_startup.agent.process import scrub

if TYPE_CHECKING:
    from vllm_otel_startup.agent.runtime import Runtime


@dataclass(frozen=True)
class Call:
    """One patched call as a probe sees it, after it returned."""

    instance: Any
    args: tuple
    kwargs: dict
    result: Any
    kind: str | None = None  # the patch table's probe name that made this call

    def arg(self, index: int, name: str) -> Any:
        if name in self.kwargs:
            return self.kwargs[name]
        return self.args[index] if len(self.args) > index else None


class Probe:
    """Base: every hook does nothing. ``name``: the patch table's probe name; ``phase``: the spans it watches."""

    name: ClassVar[str | None] = None
    names: ClassVar[tuple[str, ...]] = ()  # several patch-table probe names served by one probe (call.kind says which)
    phase: ClassVar[str | None] = None

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        return None

    def on_start(self, rt: Runtime, span: Any) -> None:
        return None

    def on_ending(self, rt: Runtime, span: Any) -> None:
        return None

    def uninstall(self) -> None:
        """Undo what the probe patched (call counters)."""
        return None


def _config_facts(vllm_config: Any) -> dict[str, Any]:
    mc = getattr(vllm_config, "model_config", None)
    pc = getattr(vllm_config, "parallel_config", None)
    cc = getattr(vllm_config, "compilation_config", None)
    dc = getattr(vllm_config, "device_config", None)
    facts: dict[str, Any] = {}
    if mc is not None:
        facts[sc.MODEL] = scrub(str(getattr(mc, "model", "")))  # e.g. s3://key:secret@bucket/...
        served = getattr(mc, "served_model_name", None)
        if served:
            facts[sc.SERVED_MODEL_NAME] = scrub(str(served if isinstance(served, str) else served[0]))
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


# ---- call probes: after a patched call returned ----------------------------------------------------------
class ConfigFacts(Probe):
    """create_engine_config() -> VllmConfig: the facts the whole start is labelled with."""

    name = "config"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        facts = _config_facts(call.result)
        rt.facts.update(facts)
        if span is not None:
            span.set_attributes(facts)


SUBPROCESS_SPAN = "Model inspection subprocess"


class ModelInspection(Probe):
    """A cache hit is an inspection that needed no subprocess (its child span) since it began."""

    name = "model_inspection"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        if span is not None:
            began = span.start_time or 0
            miss = any(name == SUBPROCESS_SPAN and start >= began for start, _, name, *_ in list(rt.local))
            span.set_attribute(sc.MODEL_INSPECTION_CACHE_HIT, not miss)


class KvCacheProfile(Probe):
    name = "kv_cache_profile"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        if span is not None and isinstance(call.result, int):
            span.set_attribute(sc.KV_CACHE_BYTES, call.result)


def filesystem_of(path: str) -> str | None:
    """The file-system type of the mount holding ``path`` (its real path), as /proc/self/mounts names it."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    best, fs_type = -1, None
    for m in mounts:
        if len(m) < 3:
            continue
        point = m[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, fs_type = len(point), m[2]
    return fs_type


END_NS = "_vos_end_ns"  # set on a span by processor._run_before_end: the end time it is about to carry


def gb_per_s(nbytes: Any, span: Any) -> float | None:
    """Throughput of ``nbytes`` moved during ``span`` (ending now: its end time is already taken), GB/s of 10^9
    bytes, over exactly the duration the span will carry."""
    start_ns = getattr(span, "start_time", None)
    if not nbytes or not start_ns:
        return None
    seconds = ((getattr(span, END_NS, None) or time.time_ns()) - start_ns) / 1e9
    return round(nbytes / seconds / 1e9, 4) if seconds > 0 else None


# ---- weights: one probe for every loader -------------------------------------------------------------------
OBJECT_STORE_SCHEMES = ("s3://", "gs://", "az://")
# loader class -> the name vllm.weights.loader carries (vLLM's load format of the same name where there is one)
LOADER_NAMES = {
    "DefaultModelLoader": "default", "RunaiModelStreamerLoader": "runai_streamer",
    "ShardedStateLoader": "sharded_state", "TensorizerLoader": "tensorizer", "DummyModelLoader": "dummy",
    "IpcModelLoader": "ipc_cache", "ModelExpressModelLoader": "modelexpress", "MxModelLoader": "modelexpress",
    "BitsAndBytesModelLoader": "bitsandbytes", "GGUFModelLoader": "gguf",
}
_NO_FILES = frozenset({"dummy", "ipc_cache", "modelexpress"})  # loaders whose weights come from no file here


def _format_of(loader: Any) -> str | None:
    lf = getattr(getattr(loader, "load_config", None), "load_format", None)
    return None if lf is None else str(getattr(lf, "value", lf))


def _paths(value: Any) -> list[str] | None:
    """Weight file paths in a loader's return value or argument: a path, a list of them, or the first list of
    paths in a tuple (DefaultModelLoader._prepare_weights -> (folder, files, use_safetensors, index))."""
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, list) and all(isinstance(v, (str, os.PathLike)) for v in value):
        return [os.fspath(v) for v in value]
    if isinstance(value, tuple):
        return next((_paths(v) for v in value if isinstance(v, list) and _paths(v) is not None), None)
    return None


def _is_object_uri(path: Any) -> bool:
    return isinstance(path, str) and path.lower().startswith(OBJECT_STORE_SCHEMES)


def _tensor_bytes(model: Any) -> int | None:
    """Bytes of a model's parameters and buffers (shared tensors once): what a daemon or a peer handed over."""
    try:
        seen, total = set(), 0
        for t in [*model.parameters(), *model.buffers()]:
            key = (t.data_ptr(), t.numel())
            if key not in seen:
                seen.add(key)
                total += t.numel() * t.element_size()
        return total
    except Exception:  # noqa: BLE001 - not a module (a fake, a meta model): no figure
        return None


class WeightsLoad(Probe):
    """Load weights, for every loader: which loader read what, from where, and how fast.

    Call probes (patch table rows) collect during one load; the span's end writes the attributes:
      weights_loader    get_model_loader(load_config) -> loader: the load format asked for, the loader picked
      prepare_weights   DefaultModelLoader._prepare_weights(path, ...) -> (folder, files, use_safetensors, ...)
      weight_files      a loader's own file list (its return value, else its first argument)
      streamer_request  Run:ai prepare_request(fs, paths, creds) -> [(header_offset, tensors, sizes)]: the bytes
                        the streamer reads per file or object (header + tensors: the object's size)
      load_weights      our Load weights span of a loader: the loader instance and the model path it reads
    The effective load format is what was read (auto -> safetensors / pt / mistral by the files found); the
    reason says why it differs from the requested one (auto, a daemon fallback to disk)."""

    names = ("weights_loader", "prepare_weights", "weight_files", "streamer_request", "load_weights")
    phase = "weights_load"

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.requested: str | None = None  # load format asked for (get_model_loader, before this load)
        self.requested_loader: str | None = None
        self.loader: Any = None  # the loader instance that read the weights
        self.model_path: str | None = None
        self.files: dict[str, int | None] = {}  # path or object URI -> bytes read (None: unknown yet)
        self.fresh = 0  # bytes of files written during this start (downloaded now)
        self.fresh_files = 0
        self.use_safetensors: bool | None = None
        self.tensor_bytes: int | None = None  # daemon / peer: bytes of the tensors handed over

    # ---- collection -------------------------------------------------------------------------------------
    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        name = call.kind
        if name == "weights_loader":
            self.requested = _format_of(call.result)  # the loader keeps the LoadConfig it was given
            self.requested_loader = LOADER_NAMES.get(type(call.result).__name__)
        elif name == "prepare_weights":
            self.loader = call.instance
            model = call.arg(0, "model_name_or_path")
            self.model_path = None if model is None else str(model)
            result = call.result
            if isinstance(result, tuple) and len(result) > 2 and isinstance(result[2], bool):
                self.use_safetensors = result[2]
            self._add_local(rt, _paths(result) or [])
        elif name == "weight_files":
            self.loader = self.loader or call.instance
            paths = _paths(call.result) or _paths(call.arg(0, "paths")) or []
            self._add_local(rt, paths)
        elif name == "streamer_request":
            paths = _paths(call.arg(1, "paths")) or []
            for path, meta in zip(paths, call.result or (), strict=False):
                offset, _tensors, sizes = meta
                self.files[path] = int(offset) + sum(int(s) for s in sizes)
        elif name == "load_weights":
            self.loader = call.instance
            mc = call.arg(1, "model_config")
            if mc is None:  # TensorizerLoader._load_model_serialized_cpu(vllm_config)
                mc = getattr(call.arg(0, "vllm_config"), "model_config", None)
            path = getattr(mc, "model_weights", None) or getattr(mc, "model", None)
            tc = getattr(call.instance, "tensorizer_config", None)
            uri = getattr(tc, "tensorizer_uri", None)
            if uri:  # the tensorizer artifact (a file, or an object URI whose size is not listed here)
                path = str(uri)
                self._add_local(rt, [path])
            if path:
                self.model_path = str(path)
            loader = LOADER_NAMES.get(type(call.instance).__name__)
            if loader in ("ipc_cache", "modelexpress") and not self.files:
                model = call.arg(0, "model")
                self.tensor_bytes = _tensor_bytes(model if hasattr(model, "parameters") else call.result)

    def _add_local(self, rt: Runtime, paths: list[str]) -> None:
        for f in paths:
            if _is_object_uri(f):
                self.files.setdefault(f, None)
                continue
            try:
                st = os.stat(f)  # follows hub-cache symlinks to the blob
            except OSError:
                continue
            if f not in self.files and st.st_mtime_ns >= rt.info.create_ns:  # written during this start
                self.fresh += st.st_size
                self.fresh_files += 1
            self.files[f] = st.st_size

    # ---- the span's attributes --------------------------------------------------------------------------
    def attributes(self) -> dict[str, Any]:
        cls = type(self.loader).__name__ if self.loader is not None else None
        loader = LOADER_NAMES.get(cls or "", (cls or "").removesuffix("ModelLoader").lower() or None)
        loader = loader or self.requested_loader
        attrs: dict[str, Any] = {}
        if loader:
            attrs[sc.WEIGHTS_LOADER] = loader
        requested = self.requested or _format_of(self.loader)
        effective, reason = self._effective(loader, requested)
        if requested:
            attrs[sc.WEIGHTS_LOAD_FORMAT_REQUESTED] = requested
        if effective:
            attrs[sc.WEIGHTS_LOAD_FORMAT] = effective
        if reason and effective != requested:
            attrs[sc.WEIGHTS_LOAD_FORMAT_REASON] = reason
        source = self._source(loader)
        if source:
            attrs[sc.WEIGHTS_SOURCE] = source
        if loader == "dummy":
            attrs[sc.WEIGHTS_BYTES], attrs[sc.WEIGHTS_FILES] = 0, 0
        elif self.files:
            known = [b for b in self.files.values() if b is not None]
            attrs[sc.WEIGHTS_FILES] = len(self.files)
            if len(known) == len(self.files):
                attrs[sc.WEIGHTS_BYTES] = sum(known)
        elif self.tensor_bytes is not None:
            attrs[sc.WEIGHTS_BYTES] = self.tensor_bytes
        if source == "hub_download":
            attrs[sc.DOWNLOAD_BYTES], attrs[sc.DOWNLOAD_FILES] = self.fresh, self.fresh_files
        local = next((f for f in self.files if not _is_object_uri(f)), None)
        fs_type = filesystem_of(local) if local else None
        if fs_type:  # the advice names the storage a slow load read from
            attrs[sc.WEIGHTS_FILESYSTEM] = fs_type
        if loader == "runai_streamer" or effective == "runai_streamer_sharded":
            conc = os.environ.get("RUNAI_STREAMER_CONCURRENCY", "")  # the loader puts its extra config here
            if conc.strip().isdigit():
                attrs[sc.WEIGHTS_STREAMER_CONCURRENCY] = int(conc)
        return attrs

    def _effective(self, loader: str | None, requested: str | None) -> tuple[str | None, str | None]:
        own = _format_of(self.loader) or requested
        if loader == "default" and own in ("auto", "hf") and self.files:
            names = [os.path.basename(f) for f in self.files]
            if self.use_safetensors and names and all(n.startswith("consolidated") for n in names) and own == "auto":
                fmt = "mistral"
            else:
                fmt = "safetensors" if self.use_safetensors or all(n.endswith(".safetensors") for n in names) else "pt"
            why = f"{own}: {fmt} files found"
        else:
            fmt, why = own, None
        if self.requested_loader and loader and self.requested_loader != loader and loader == "default":
            why = (f"{self.requested}: fell back to disk loading through the default loader ({own}"
                   f"{f' -> {fmt}' if fmt != own else ''})")
        return fmt, why

    def _source(self, loader: str | None) -> str | None:
        if loader == "dummy":
            return "dummy"
        if loader == "ipc_cache":
            return "daemon"
        if loader == "modelexpress" and not self.files:
            return "peer"
        if any(_is_object_uri(f) for f in self.files) or _is_object_uri(self.model_path):
            return "object_store"
        if not self.files:
            return None
        if self.model_path and (os.path.isdir(self.model_path) or os.path.isfile(self.model_path)):
            return "local_dir"
        return "hub_download" if self.fresh else "hub_cache"

    # ---- the span -----------------------------------------------------------------------------------------
    def on_ending(self, rt: Runtime, span: Any) -> None:
        try:
            attrs = {k: v for k, v in self.attributes().items() if k not in (span.attributes or {})}
            span.set_attributes(attrs)
            gbps = gb_per_s((span.attributes or {}).get(sc.WEIGHTS_BYTES), span)
            if gbps is not None:
                span.set_attribute(sc.WEIGHTS_GBPS, gbps)
        finally:
            self._reset()


class AotLoad(Probe):
    """_try_load_aot_compiled_fn(model, aot_compilation_path) -> the loaded function or None (compile again).
    The reason of a failed load was set by the monitor it opens (wrappers.SpanContextManager)."""

    name = "aot_load"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        if span is None:
            return
        size = _file_size(call.arg(1, "aot_compilation_path"))
        if size is not None:
            span.set_attribute(sc.COMPILE_AOT_BYTES, size)
        span.set_attribute(sc.COMPILE_AOT_LOADED, call.result is not None)
        if call.result is None and sc.COMPILE_AOT_LOAD_ERROR not in (span.attributes or {}):
            span.set_attribute(sc.COMPILE_AOT_LOAD_ERROR, "FileNotFoundError: no AOT artifact yet" if size is None
                               else "not loaded (no reason given)")
        model, path = call.arg(0, "model"), call.arg(1, "aot_compilation_path")
        if model is not None and path:
            from vllm_otel_startup.agent import compile_key  # the AOT key: on this span and the compile that follows

            try:  # vLLM internals a release may lack: only the key's attributes are lost
                key = compile_key.record_aot(model, str(path))
            except Exception:  # noqa: BLE001
                failed(SPANS, "compile key (AOT)")
                return
            span.set_attributes(key)
            if call.result is None:
                rt.add_pending("torch_compile", key)


class AotSave(Probe):
    """AOTCompiledFunction.save_compiled_function(path): the artifact's size."""

    name = "aot_save"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        size = _file_size(call.arg(0, "path"))
        if span is not None and size is not None:
            span.set_attribute(sc.COMPILE_AOT_BYTES, size)


class CompileKey(Probe):
    """VllmBackend.__call__ (inside torch.compile): vLLM's cache key, its factor hashes and per-factor digests
    (compile_key.py), pending for the torch.compile span."""

    name = "compile_key"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        from vllm_otel_startup.agent import compile_key  # lazy: only a compiling process gets here

        if sc.COMPILE_CACHE_KEY in rt.pending.get("torch_compile", {}):
            return  # the AOT key (recorded at the AOT load) governs this compile; the backend's is inside it
        rt.add_pending("torch_compile", compile_key.record(call.instance))


class AotKeyFactors(Probe):
    """aot_compile_hash_factors(vllm_config) -> the factors vLLM hashes into the AOT key (kept for AotLoad)."""

    name = "aot_key_factors"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        from vllm_otel_startup.agent import compile_key

        compile_key.keep_aot_factors(call.result)


def _file_size(path: Any) -> int | None:
    try:
        return os.path.getsize(os.fspath(path)) if path is not None else None
    except (OSError, TypeError):
        return None


class Capture(Probe):
    """capture_model() -> bytes the graphs took (vLLM's own figure); the V2 runner's batch shapes per mode."""

    name = "capture"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        if span is None:
            return
        if isinstance(call.result, int) and not isinstance(call.result, bool):
            span.set_attribute(sc.CUDAGRAPH_MEMORY, call.result)
        descs = getattr(getattr(call.instance, "cudagraph_manager", None), "_capture_descs", None)
        if isinstance(descs, dict):
            for mode, shapes in descs.items():
                key = {"FULL": sc.CUDAGRAPH_SHAPES_FULL, "PIECEWISE": sc.CUDAGRAPH_SHAPES_PIECEWISE}.get(
                    getattr(mode, "name", str(mode)))
                if key and hasattr(shapes, "__len__"):
                    span.set_attribute(key, len(shapes))


class CaptureMode(Probe):
    """_capture_cudagraphs(batch_descriptors, cudagraph_runtime_mode): one runtime mode's batch shapes."""

    name = "capture_mode"

    def after_call(self, rt: Runtime, span: Any, call: Call) -> None:
        if span is None:
            return
        mode, shapes = call.arg(1, "cudagraph_runtime_mode"), call.arg(0, "batch_descriptors")
        if mode is not None:
            span.set_attribute(sc.CUDAGRAPH_MODE, str(getattr(mode, "name", mode)))
        if hasattr(shapes, "__len__"):
            span.set_attribute(sc.CUDAGRAPH_SHAPES, len(shapes))


# ---- phase probes: around every span of a phase (processor side) -------------------------------------------
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

    def on_start(self, rt: Runtime, span: Any) -> None:
        if "torch._inductor.cpp_builder" not in sys.modules:
            with contextlib.suppress(Exception):
                import torch._inductor.cpp_builder  # noqa: F401 - torch is loaded: this process is compiling
        self.cpp_builds.install()
        self.before = (_torch_counters(), self.cpp_builds.count)

    def on_ending(self, rt: Runtime, span: Any) -> None:
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


def hub_cache_dir() -> str | None:
    """huggingface_hub's cache folder as the process resolved it (HF_HUB_CACHE, else HF_HOME/hub)."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None and getattr(constants, "HF_HUB_CACHE", None):
        return str(constants.HF_HUB_CACHE)
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")


def blobs_written_since(cache: str, since_ns: int) -> tuple[int, int]:
    """(files, bytes) of hub-cache blobs (finished, or ``.incomplete`` partial ones) last written at or after
    ``since_ns``: what arrived from the hub since then. Blobs a cache hit reuses are not written."""
    files = total = 0
    try:
        repos = [e.path for e in os.scandir(cache) if e.is_dir() and "--" in e.name]
    except OSError:
        return 0, 0
    for repo in repos:
        blobs = os.path.join(repo, "blobs")
        try:  # a blob created (or renamed from .incomplete) since then touched its directory: skip the others
            if os.stat(blobs).st_mtime_ns < since_ns:
                continue
            entries = list(os.scandir(blobs))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_mtime_ns >= since_ns:
                files += 1
                total += st.st_size
    return files, total


class HubDownload(Probe):
    """Download weights - HF (vLLM's span around download_weights_from_hf): the hub-cache blobs written during
    the span are what arrived; their bytes over the span's duration are the download throughput. With several
    workers, one downloads under vLLM's file lock and the others wait in their own span: they see the same blobs
    arrive, so sum the span with the most bytes, not all of them."""

    phase = "weights_download"

    def on_ending(self, rt: Runtime, span: Any) -> None:
        start = getattr(span, "start_time", None)
        cache = hub_cache_dir()
        if not start or not cache:
            return
        files, nbytes = blobs_written_since(cache, start)
        attrs: dict[str, Any] = {sc.DOWNLOAD_FILES: files, sc.DOWNLOAD_BYTES: nbytes}
        gbps = gb_per_s(nbytes, span)
        if gbps is not None:
            attrs[sc.DOWNLOAD_GBPS] = gbps
        span.set_attributes(attrs)


class CudaGraphCount(Probe):
    """Capture model: CUDAGraph.capture_begin calls during the span. Installed in the process that captures,
    when its capture span starts: torch.cuda is never touched elsewhere (never imported by us)."""

    phase = "cudagraph_capture"

    def __init__(self) -> None:
        self.captures = CallCounter("torch.cuda.graphs", "CUDAGraph.capture_begin")
        self.before = 0

    def on_start(self, rt: Runtime, span: Any) -> None:
        self.captures.install()
        self.before = self.captures.count

    def on_ending(self, rt: Runtime, span: Any) -> None:
        if self.captures.installed:
            span.set_attribute(sc.CUDAGRAPH_COUNT, self.captures.count - self.before)

    def uninstall(self) -> None:
        self.captures.uninstall()


PROBES: tuple[type[Probe], ...] = (ConfigFacts, ModelInspection, KvCacheProfile, WeightsLoad, AotLoad, AotSave,
                                   CompileKey, AotKeyFactors, Capture, CaptureMode, CompileCache, HubDownload,
                                   CudaGraphCount)
CALL_PROBE_NAMES = frozenset(n for p in PROBES for n in (p.names or (p.name,)) if n)


class Probes:
    """One instance of every probe for this process, and the one fail-soft way to invoke them."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.all = [] if settings.off("probes") else [cls() for cls in PROBES]
        self.by_name = {n: p for p in self.all for n in (p.names or (p.name,)) if n}
        self.by_phase = {p.phase: p for p in self.all if p.phase}

    def _safe(self, probe: Probe | None, hook: str, *args: Any) -> None:
        if probe is None:
            return
        try:
            getattr(probe, hook)(self.rt, *args)
        except Exception:  # noqa: BLE001 - a probe that fails only loses its attributes
            failed(SPANS, f"probe {type(probe).__name__}.{hook}")

    def after_call(self, name: str | None, span: Any, call: Call) -> None:
        if call.kind is None:
            call = Call(call.instance, call.args, call.kwargs, call.result, name)
        self._safe(self.by_name.get(name or ""), "after_call", span, call)

    def on_start(self, phase: str, span: Any) -> None:
        self._safe(self.by_phase.get(phase), "on_start", span)

    def on_ending(self, phase: str, span: Any) -> None:
        self._safe(self.by_phase.get(phase), "on_ending", span)

    def uninstall(self) -> None:
        for probe in self.all:
            with contextlib.suppress(Exception):
                probe.uninstall()
