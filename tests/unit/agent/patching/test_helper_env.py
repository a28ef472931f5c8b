"""agent/helper_env.py: PyTorch's own Python helpers start without OpenTelemetry's sitecustomize: the environment
torch builds for them loses that one PYTHONPATH folder, nothing else; a torch without the function is left alone,
and a failure leaves the environment as torch made it. (With a real start: agent/test_retro_spans.py.)"""

from __future__ import annotations

import os
import sys
import types

from vllm_otel_startup.agent.patching import helper_env


def test_without_drops_only_that_folder_and_keeps_empty_entries(tmp_path):
    site, other = str(tmp_path / "auto"), str(tmp_path / "lib")
    path = os.pathsep.join([other, "", site, os.path.join(site, "..", "auto"), "."])
    assert helper_env.without(path, helper_env._norm(site)) == os.pathsep.join([other, "", "."])  # noqa: SLF001


def _torch_utils(env: dict) -> types.ModuleType:
    mod = types.ModuleType("torch._inductor.utils")
    mod.python_subprocess_env = lambda: dict(env)
    return mod


def test_the_wrapped_function_returns_torchs_environment_without_the_otel_folder(tmp_path, monkeypatch):
    site = tmp_path / "opentelemetry" / "instrumentation" / "auto_instrumentation"
    auto = types.ModuleType("opentelemetry.instrumentation.auto_instrumentation")
    auto.__file__ = str(site / "__init__.py")
    monkeypatch.setitem(sys.modules, auto.__name__, auto)
    assert helper_env.otel_site_dir() == helper_env._norm(str(site))  # noqa: SLF001
    mod, undo = _torch_utils({"PYTHONPATH": os.pathsep.join(["/app", str(site)]), "HOME": "/root"}), []
    original = mod.python_subprocess_env
    helper_env.install(mod, undo)
    assert mod.python_subprocess_env() == {"PYTHONPATH": "/app", "HOME": "/root"}
    assert undo == [(mod, "python_subprocess_env", original)]


def test_without_the_otel_bootstrap_loaded_the_environment_is_torchs(monkeypatch):
    monkeypatch.delitem(sys.modules, "opentelemetry.instrumentation.auto_instrumentation", raising=False)
    mod, undo = _torch_utils({"PYTHONPATH": "/app:/otel"}), []
    helper_env.install(mod, undo)
    assert mod.python_subprocess_env() == {"PYTHONPATH": "/app:/otel"}


def test_a_torch_without_the_function_is_left_alone():
    mod, undo = types.ModuleType("torch._inductor.utils"), []
    helper_env.install(mod, undo)
    assert undo == [] and not hasattr(mod, "python_subprocess_env")


def test_a_failure_leaves_the_environment_as_torch_made_it(monkeypatch):
    def broken():
        raise OSError("planted")

    monkeypatch.setattr(helper_env, "otel_site_dir", broken)
    mod, undo = _torch_utils({"PYTHONPATH": "/app:/otel"}), []
    helper_env.install(mod, undo)
    assert mod.python_subprocess_env() == {"PYTHONPATH": "/app:/otel"}
