"""What a missing test tool means: in CI (``CI`` set to a true value, as CI services and `.ci/run` set it) the
test fails, because a skip would leave CI green without the check ever running; elsewhere (a developer's fast
lane) it skips and says what to install."""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def missing(what: str, install: str) -> None:
    """Fail in CI, skip elsewhere; never returns."""
    if in_ci():
        pytest.fail(f"{what}, and this is CI (CI={os.environ.get('CI')}): {install} must provide it", pytrace=False)
    pytest.skip(f"{what} ({install} installs it)")


def command(*names: str, install: str) -> str:
    """The first of these commands on PATH."""
    found = next((p for p in map(shutil.which, names) if p), None)
    if found is None:
        missing(f"none of {', '.join(names)} on PATH", install)
    return found


def module(name: str, install: str) -> ModuleType:
    """An importable module (e.g. Pillow's ``PIL.Image``)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"{name} cannot be imported", install)
        raise  # not reached: missing() fails or skips
