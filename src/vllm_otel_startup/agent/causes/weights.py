"""The weights cause probe, one for every loader (WeightsLoad): which loader read what, from where (local folder,
hub cache or download, object store, daemon, peer), how many bytes and how fast; with its loader-name table and
the helpers that read paths and sizes out of the loaders' calls."""

from __future__ import annotations

import os
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call, Probe, ProbeHost, filesystem_of, gb_per_s, span_attributes

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
    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
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

    def _add_local(self, rt: ProbeHost, paths: list[str]) -> None:
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
    def on_ending(self, rt: ProbeHost, span: Any) -> None:
        try:
            attrs = {k: v for k, v in self.attributes().items() if k not in span_attributes(span)}
            span.set_attributes(attrs)
            gbps = gb_per_s(span_attributes(span).get(sc.WEIGHTS_BYTES), span)
            if gbps is not None:
                span.set_attribute(sc.WEIGHTS_GBPS, gbps)
        finally:
            self._reset()
