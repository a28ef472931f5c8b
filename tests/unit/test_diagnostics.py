"""OTEL_PYTHON_VLLM_STARTUP_OFF, the diagnostics that benchmarks set to leave parts of the agent out, is read one
way and is not a user setting: `opentelemetry-instrument --help` offers every user setting and not this one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_otel_startup import diagnostics, settings

SRC = Path(diagnostics.__file__).resolve().parents[1]  # the tree under test, ahead of any installed copy


def test_diagnostic_parts_left_out():
    env = {diagnostics.OFF.name: " Watchers, probes ,nonsense,row:Fake_Mod:Mod.left"}
    assert diagnostics.off("watchers", env) and diagnostics.off("probes", env)
    assert diagnostics.off("row:fake_mod:mod.left", env)  # hooks.py asks in lower case
    assert not diagnostics.off("compile_stages", env) and not diagnostics.off("span_resources", env)
    assert not any(diagnostics.off(part, {}) for part in diagnostics.PARTS)  # default: everything on


def test_the_diagnostics_are_no_user_setting():
    assert diagnostics.OFF.internal and diagnostics.OFF not in settings.ALL
    assert diagnostics.OFF.name.startswith(settings.PREFIX)


def _option(name: str) -> str:
    """The option opentelemetry-instrument makes of an OTEL_* attribute (auto_instrumentation.run's rule)."""
    return "--" + re.sub(r"OTEL_(PYTHON_)?", "", name).lower()


def test_opentelemetry_instrument_help_offers_the_user_settings_and_not_the_diagnostics():
    launcher = Path(sys.executable).with_name("opentelemetry-instrument")
    if not launcher.exists():
        pytest.skip(f"no opentelemetry-instrument beside {sys.executable}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([str(launcher), "--help"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    offered = set(re.findall(r"--vllm_startup_\w+", out.stdout))
    users = {_option(s.name) for s in settings.ALL if not s.internal}
    assert "--vllm_startup_dir" in users and len(users) >= 10
    assert offered == users  # every user setting, nothing else of ours
    assert _option(diagnostics.OFF.name) == "--vllm_startup_off" and "--vllm_startup_off" not in out.stdout
    assert diagnostics.OFF.name not in out.stdout
