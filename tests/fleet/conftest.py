"""tests/fleet: dashboards, alert rules and deployment files, validated offline (no vLLM start)."""

from __future__ import annotations


def pytest_configure(config) -> None:
    import fleet_tools

    fleet_tools.FAST_LANE = "not e2e" in (config.getoption("markexpr") or "")
