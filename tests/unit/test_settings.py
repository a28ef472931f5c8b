"""Every OTEL_PYTHON_VLLM_STARTUP_* setting is declared once, with its default, and read one way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_otel_startup import diagnostics, settings

SRC = Path(__file__).resolve().parents[2] / "src" / "vllm_otel_startup"


@pytest.mark.parametrize("value, expected", [
    (None, False), ("", False), ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("false", False), ("Off", False), ("no", False), ("none", False), ("maybe", False)])
def test_one_boolean_grammar_default_off(value, expected):
    env = {} if value is None else {settings.DEBUG.name: value}
    assert settings.flag(settings.DEBUG, env) is expected


@pytest.mark.parametrize("value, expected", [(None, True), ("", True), ("0", False), ("OFF", False),
                                             ("true", True), ("typo", True)])
def test_one_boolean_grammar_default_on(value, expected):
    env = {} if value is None else {settings.SUMMARY.name: value}
    assert settings.flag(settings.SUMMARY, env) is expected


def test_numbers_fall_back_to_their_default():
    assert settings.seconds_from_ms(settings.FLUSH_MS, {}) == 0.025
    assert settings.seconds_from_ms(settings.FLUSH_MS, {settings.FLUSH_MS.name: "abc"}) == 0.025
    assert settings.seconds_from_ms(settings.FLUSH_MS, {settings.FLUSH_MS.name: "-5"}) == 0.0
    assert settings.number(settings.SAMPLE_HZ, {settings.SAMPLE_HZ.name: "2.5"}) == 2.5


def test_the_start_directory(tmp_path):
    assert settings.start_dir({settings.DIR.name: str(tmp_path)}) == str(tmp_path)
    assert settings.start_dir({"XDG_CACHE_HOME": "/x"}) == "/x/vllm-otel-startup/starts"


def test_no_setting_is_read_outside_the_settings_module():
    names = {s.name for s in settings.ALL} | {diagnostics.OFF.name}
    for path in SRC.rglob("*.py"):
        if path.name in ("settings.py", "diagnostics.py"):
            continue
        for found in re.findall(r"OTEL_PYTHON_VLLM_STARTUP_[A-Z_]+", path.read_text()):
            assert found in names, f"{path.name}: {found} is not declared in settings.py"
        assert not re.search(r"environ(?:\.get)?\(?\[?[\"']OTEL_PYTHON_VLLM_STARTUP_", path.read_text()), \
            f"{path.name} reads a setting directly"
