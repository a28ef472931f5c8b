"""tests/fleet: dashboards, alert rules and deployment files, validated offline (no vLLM start)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parents[1]):  # tools.py here; the dashboards package at the repository root
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def pytest_configure(config) -> None:
    import tools

    tools.FAST_LANE = "not e2e" in (config.getoption("markexpr") or "")
