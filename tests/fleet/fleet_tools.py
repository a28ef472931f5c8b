"""Where the offline validators live (installed by tests/fleet/bootstrap.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOME = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e"))
VENV_BIN = Path(sys.executable).parent
GRAFANA_SCHEMA = HOME / "fleet" / "grafana-schema" / "dashboard.schema.json"
GRAFANA_SCHEMA_V2 = HOME / "fleet" / "grafana-schema" / "dashboard-v2beta1-spec.schema.json"
COMPOSE_SCHEMA = HOME / "fleet" / "compose-schema" / "compose-spec.json"
KUBERNETES_VERSION = "1.32.0"
FAST_LANE = False  # set by conftest.py for `pytest -m "not e2e"`: a missing validator skips instead of failing


def _missing(what: str) -> None:
    from support import ci

    if FAST_LANE and not ci.in_ci():  # in CI a validator that could not be installed fails, in every lane
        pytest.skip(f"{what} (fast lane: run tests/fleet/bootstrap.sh for these)")
    pytest.fail(what)


def tool(name: str) -> str:
    """Path of a command-line tool: promtool from the e2e pkgroot, kubectl from PATH or the venv."""
    for candidate in (HOME / "pkgroot/usr/bin" / name, HOME / "fleet/pkgroot/usr/bin" / name, VENV_BIN / name):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if not found:
        _missing(f"{name} missing: run tests/e2e/bootstrap.sh and tests/fleet/bootstrap.sh")
    return found


def data_file(path: Path) -> Path:
    if not path.exists():
        _missing(f"{path} missing: run tests/fleet/bootstrap.sh")
    return path


def run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a command; Python children import this tree's package and dashboards."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.run(cmd, cwd=cwd or REPO, capture_output=True, text=True, timeout=120, env=env)
