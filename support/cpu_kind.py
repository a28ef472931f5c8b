"""Load vLLM's CPU kernels as on a host of another CPU kind, on a host with more instruction sets (the compatibility
tier's ``VOS_COMPAT_CPU=avx2`` or ``avx512``): torch computes with that kind's kernels (``ATEN_CPU_CAPABILITY``) and
its CPU checks, by which vLLM picks its kernel build, answer as on such a host. Instructions the host has beyond that
kind stay available to the process: this shows that kind's path loads and runs, not that nothing else is used.

``apply(kind)`` patches lazily: nothing is imported until the process imports ``torch.cpu`` itself."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

# what torch.cpu's checks answer on each kind (an absent check is left alone: not every torch has each)
KINDS = {
    "avx2": {"_is_avx512_supported": False, "_is_avx512_bf16_supported": False, "_is_avx512_vnni_supported": False,
             "_is_amx_tile_supported": False, "_is_amx_fp16_supported": False},
    "avx512": {"_is_avx512_bf16_supported": False, "_is_amx_tile_supported": False, "_is_amx_fp16_supported": False},
}
ATEN = {"avx2": "avx2", "avx512": "avx512"}


def _patch(module, kind: str) -> None:
    for name, value in KINDS[kind].items():
        if hasattr(module, name):
            setattr(module, name, lambda value=value: value)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.cpu":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run, kind = spec.loader.exec_module, self.kind

        def exec_module(module) -> None:
            run(module)
            _patch(module, kind)

        spec.loader.exec_module = exec_module
        return spec


def apply(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown CPU kind {kind!r}: one of {', '.join(KINDS)}")
    os.environ.setdefault("ATEN_CPU_CAPABILITY", ATEN[kind])
    if "torch.cpu" in sys.modules:
        _patch(sys.modules["torch.cpu"], kind)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(kind))
