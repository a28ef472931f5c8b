"""Every real start the suite makes is a plan, queued in the start pool (support/start_pool.py) when the test run
begins, so that as many starts run at once as the machine has cores for, from the first test to the last (the fast
tests run first, beside them: tests/conftest.py).

A plan (``@plan(key)``) is a function of the :class:`Session` that makes one start (or a start and its plain
control) and returns what its tests read. Plans live beside the tests that read them (a test module's, a tier's
conftest). ``after`` names plans that must be done first (a cache root they share); ``alone`` plans run with the
machine to themselves (a kill timed to 0.1 s, a transfer rate, a start whose tests read its CPU figures) and are
queued first; ``early`` ones (long: a start behind an install) next, with the heads of ``after`` chains;
``select(items)`` says whether the selected tests read the plan (default: one of them is in the plan's module, or
names a fixture, or passes a parameter, of the plan's key). What plans need besides the session's backends, tiny
model and work directory (a hub server, loader artifacts, another tier's stores) is a :meth:`Session.resource`,
made once on first use, in whichever thread needs it first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
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
    module: str  # the module whose tests read it
    after: tuple[str, ...] = ()
    alone: bool = False
    select: Callable[[list], bool] | None = None
    early: bool = False


PLANS: dict[str, Plan] = {}


def plan(key: str, *, after: tuple[str, ...] = (), alone: bool = False, module: str | None = None,
         select: Callable[[list], bool] | None = None, early: bool = False):
    """Register ``make(session)`` as the plan ``key`` (``module``: its tests' module, default the defining one)."""
    def register(make: Callable[[Session], Any]) -> Callable[[Session], Any]:
        if key in PLANS:
            raise ValueError(f"two plans named {key!r}")
        PLANS[key] = Plan(key, make, module or make.__module__, tuple(after), alone, select, early)
        return make
    return register


def selected(items: list) -> list[str]:
    """The plans the selected tests read, in registration order."""
    modules: set[str] = set()
    names: set[str] = set()
    for item in items:
        modules.add(getattr(getattr(item, "module", None), "__name__", ""))
        names |= set(item.fixturenames)
        callspec = getattr(item, "callspec", None)
        names |= {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
    return [k for k, p in PLANS.items()
            if (p.select(items) if p.select is not None else (p.module in modules or k in names))]


class Session:
    """What plans share: the pool, the session's backends, tiny model and work directory (made in the background:
    reading one waits for it), and resources. ``VOS_E2E_LOCK=/path``: that file lock is held from the first start
    to the session's end (a machine shared with other suites)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pool = StartPool("tests")
        self._resources: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closers: list[Callable[[], None]] = []
        self._lockfile = None
        if path := os.environ.get("VOS_E2E_LOCK"):
            self._lockfile = open(path, "a")  # noqa: SIM115 - held for the session
            fcntl.flock(self._lockfile, fcntl.LOCK_EX)
        threading.Thread(target=self.setup, daemon=True, name="e2e-setup").start()  # backends and model meanwhile

    def setup(self) -> None:
        for make in (lambda: self.backends, lambda: self.tiny_model):
            with contextlib.suppress(BaseException):  # a failure is raised to whoever reads them
                make()

    @property
    def backends(self) -> harness.Backends:
        return self.resource("backends", lambda: harness.Backends(self.workdir / "backends").start(),
                             close=harness.Backends.stop)

    @property
    def tiny_model(self) -> Path:
        return self.resource("tiny_model", lambda: harness.make_tiny_model(self.workdir / "tiny-model"))

    def resource(self, name: str, make: Callable[[], Any], close: Callable[[Any], None] | None = None) -> Any:
        """``make()``'s value, made once (by the first thread to ask; the others wait for it; a failure is raised
        to every one that asks)."""
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._resources:
                try:
                    value = make()
                except BaseException as exc:  # noqa: BLE001 - kept: each reader gets it (pytest's skip included)
                    self._resources[name] = _Failed(exc)
                else:
                    self._resources[name] = value
                    if close is not None:
                        self._closers.append(lambda: close(value))
            value = self._resources[name]
        if isinstance(value, _Failed):
            raise value.exc
        return value

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
        for key in sorted(wanted, key=lambda k: (not PLANS[k].alone, k not in heads and not PLANS[k].early)):
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
        if self._lockfile is not None:
            self._lockfile.close()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
