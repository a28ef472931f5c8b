"""Every real start of the e2e tier is a plan, queued in the suite's start pool (support/start_pool.py) when the
session begins, so that as many starts run at once as the machine has cores for, from the first test to the last.

A plan (``@plan(key)``) is a function of the :class:`Session` that makes one start (or a start and its plain
control) and returns what its tests read. Plans live beside the tests that read them (a test module's) or in
conftest.py (the shared starts, read through fixtures of the same name). ``after`` names plans that must be done
first (a cache root they share); ``alone`` plans run with the machine to themselves (a kill timed to 0.1 s, a
transfer rate) and are queued first, when there is nothing to wait for. What plans need besides the session's
backends, tiny model and work directory (a hub server, loader artifacts, a fault cache) is a :meth:`Session.resource`,
made once on first use, in whichever thread needs it first.

A module, not conftest: a test module that imports ``conftest`` gets whichever directory's conftest pytest loaded
last.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import harness
from support.start_pool import SLOTS, Later, StartPool


@dataclass(frozen=True)
class Plan:
    key: str
    make: Callable[[Session], Any]
    module: str  # the module that defines it: its tests read it
    after: tuple[str, ...] = ()
    alone: bool = False


PLANS: dict[str, Plan] = {}


def plan(key: str, *, after: tuple[str, ...] = (), alone: bool = False):
    """Register ``make(session)`` as the plan ``key``."""
    def register(make: Callable[[Session], Any]) -> Callable[[Session], Any]:
        if key in PLANS:
            raise ValueError(f"two plans named {key!r}")
        PLANS[key] = Plan(key, make, make.__module__, tuple(after), alone)
        return make
    return register


class Session:
    """What plans share: the pool, the session's backends, tiny model and work directory, and resources."""

    def __init__(self, backends: harness.Backends, tiny_model: Path, workdir: Path) -> None:
        self.backends, self.tiny_model, self.workdir = backends, tiny_model, workdir
        self.pool = StartPool("tests/e2e")
        self._resources: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closers: list[Callable[[], None]] = []

    def resource(self, name: str, make: Callable[[], Any], close: Callable[[Any], None] | None = None) -> Any:
        """``make()``'s value, made once (by the first thread to ask; the others wait for it)."""
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._resources:
                value = make()
                self._resources[name] = value
                if close is not None:
                    self._closers.append(lambda: close(value))
            return self._resources[name]

    def queue(self, keys: list[str]) -> None:
        """Queue these plans (and the plans they come after): ``alone`` ones first (nothing runs yet to wait for),
        then those others come after."""
        wanted: list[str] = []

        def add(key: str) -> None:
            for dep in PLANS[key].after:
                add(dep)
            if key not in wanted:
                wanted.append(key)

        for key in keys:
            add(key)
        heads = {d for p in PLANS.values() for d in p.after}  # chains start early: they end last otherwise
        for key in sorted(wanted, key=lambda k: (not PLANS[k].alone, k not in heads)):
            self._ahead(PLANS[key])

    def later(self, key: str) -> Later:
        """The plan's start (queued now if it was not)."""
        self.queue([key])
        return Later(self.pool, key)

    def _ahead(self, p: Plan) -> None:
        def make() -> Any:
            with SLOTS.alone() if p.alone else contextlib.nullcontext():
                return p.make(self)
        self.pool.ahead(p.key, make, after=p.after)

    def close(self) -> None:
        self.pool.close()
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def selected(items) -> list[str]:
    """The plans the selected tests read, in registration order: a test module's plans where one of its tests is
    selected; conftest's where a selected test names the fixture (or passes its name as a parameter: ``which``)."""
    modules: set[str] = set()
    names: set[str] = set()
    for item in items:
        modules.add(getattr(getattr(item, "module", None), "__name__", ""))
        names |= set(item.fixturenames)
        callspec = getattr(item, "callspec", None)
        names |= {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
    return [k for k, p in PLANS.items() if p.module in modules or k in names]
