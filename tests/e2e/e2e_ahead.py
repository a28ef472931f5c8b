"""Queuing a module's start fixtures in the background pool (support/start_pool.py) before its first test runs.
A module of its own, not conftest: a test module that imports ``conftest`` gets whichever directory's conftest
pytest loaded last."""

from __future__ import annotations

import pytest


def queue_ahead(request, names) -> None:
    """Set up each of these start fixtures that a selected test reads (by name, or as a ``which`` parameter), in
    this order, so their starts are queued now. A fixture whose setup fails is left for its tests to report."""
    wanted: set[str] = set()
    for item in request.session.items:
        wanted |= set(item.fixturenames)
        callspec = getattr(item, "callspec", None)
        wanted |= {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
    for name in names:
        if name in wanted:
            try:
                request.getfixturevalue(name)
            except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # noqa: S112
                continue  # pytest keeps it: the tests that read the fixture get the error
