"""The whole run: the fast tests first, and the real starts from the very beginning.

Every real start is a plan (support/plans.py), queued in the start pool when the run begins if any selected test
reads one: the backends start and the tiny model is built in the background meanwhile. The tests that need no
start (unit, fleet; marked not ``e2e``) run first, beside the first starts (the ones that run with the machine
to themselves leave a core for them); the tiers that read starts (compat, e2e) run after, most of their starts
made by then. The fast lane (``-m "not e2e"``) selects no plan and starts nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support import harness
from support.plans import Session, selected


def _reads_starts(item) -> bool:
    return item.get_closest_marker("e2e") is not None


def pytest_collection_modifyitems(config, items):
    items.sort(key=_reads_starts)  # stable: each group keeps pytest's order


@pytest.fixture(scope="session")
def e2e(request, tmp_path_factory) -> Session:
    """The run's plans: every start the selected tests read, queued now."""
    session = Session(tmp_path_factory.mktemp("e2e"))
    session.queue(selected(request.session.items))
    yield session
    session.close()


@pytest.fixture(scope="session", autouse=True)
def _starts_begin(request):
    """The starts begin with the run's first test, whichever it is."""
    if any(_reads_starts(item) for item in request.session.items):
        request.getfixturevalue("e2e")


@pytest.fixture(scope="session")
def workdir(e2e) -> Path:
    return e2e.workdir


@pytest.fixture(scope="session")
def backends(e2e) -> harness.Backends:
    return e2e.backends


@pytest.fixture(scope="session")
def tiny_model(e2e) -> Path:
    return e2e.tiny_model
