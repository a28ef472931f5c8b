"""Real `vllm serve` starts, several at once, made ahead of the tests that read them.

A start on these machines keeps about one core busy (each process imports, then waits for its child): two starts
side by side on two cores take the time of one. So the suite runs up to :data:`SLOTS` starts at once
(``VOS_PARALLEL_STARTS``, default: one per usable core, at most 4, and one per 6 GB of memory), and the shared starts
a tier's tests read are submitted to a :class:`StartPool` before the first of those tests runs.

- Every start takes a slot for as long as it runs (support/harness.py's ``serve``): background or not, no more
  than SLOTS starts run at once.
- A test whose assertion depends on the machine being otherwise idle (a kill timed to 0.1 s, a recorded timing)
  runs its starts inside ``SLOTS.alone()``: it waits for the running starts to end, and no other starts until it
  is done.
- ``StartPool.ahead(key, make, after=keys)`` queues ``make()`` (it makes one start) to run once the starts named
  in ``after`` are done (a cache root they share), and returns a :class:`Later`; reading the Later's attributes
  waits for the result, or runs ``make`` in the reading thread if no worker has taken it yet. An exception (a
  failed assertion, pytest's skip) is raised to every reader.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any


def default_parallel() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        mem_gb = 6.0
    return max(1, min(cores, 4, int(mem_gb // 6)))


def parallel_from_env() -> int:
    raw = os.environ.get("VOS_PARALLEL_STARTS", "").strip()
    if not raw:
        return default_parallel()
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"VOS_PARALLEL_STARTS={raw!r}: a whole number of starts at once (1 or more)") from None
    if n < 1:
        raise ValueError(f"VOS_PARALLEL_STARTS={raw!r}: a whole number of starts at once (1 or more)")
    return n


class Slots:
    """How many real starts run at once; ``alone()`` for one that needs the machine to itself."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._cond = threading.Condition()
        self._busy = 0
        self._owner: int | None = None  # the thread holding alone()
        self._waiting_alone = 0

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:  # alone()'s holder makes its own starts without waiting on itself
                self._cond.wait_for(lambda: self._owner is None and not self._waiting_alone and self._busy < self.n)
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._waiting_alone += 1
            self._cond.wait_for(lambda: self._owner is None and self._busy == 0)
            self._waiting_alone -= 1
            self._owner = threading.get_ident()
        try:
            yield
        finally:
            with self._cond:
                self._owner = None
                self._cond.notify_all()


SLOTS = Slots(parallel_from_env())
_LABEL = threading.local()  # what a pool worker is making (support/harness.py's ledger)


def label() -> str | None:
    return getattr(_LABEL, "value", None)


class _Job:
    def __init__(self, make: Callable[[], Any], after: tuple[Any, ...]) -> None:
        self.make, self.after = make, after
        self.state = "queued"  # -> running -> done
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()


class StartPool:
    """Background workers (one more than SLOTS has slots) making queued starts in the order queued, a start only once
    the starts it comes ``after`` are done (a worker never sits waiting on another start); ``where`` names the
    queuing test file in the ledger."""

    def __init__(self, where: str, slots: Slots = SLOTS) -> None:
        self.where, self.slots = where, slots
        self._jobs: dict[Any, _Job] = {}
        self._order: list[Any] = []  # queued keys, in order
        self._cond = threading.Condition()
        self._closed = False
        # one worker more than slots: a worker also observes its start's trace and builds what a start needs (no
        # slot held), while the slots stay busy
        self._workers = [threading.Thread(target=self._work, daemon=True, name=f"start-pool-{i}")
                         for i in range(slots.n + 1)]
        for t in self._workers:
            t.start()

    def ahead(self, key: Any, make: Callable[[], Any], after: tuple[Any, ...] = ()) -> Later:
        with self._cond:
            if key not in self._jobs:
                self._jobs[key] = _Job(make, tuple(after))
                self._order.append(key)
                self._cond.notify_all()
        return Later(self, key)

    def get(self, key: Any) -> Any:
        job = self._jobs[key]
        for dep in job.after:  # in this thread: a queued dependency is made here, a running one waited for
            with contextlib.suppress(BaseException):  # its own readers get its error; this start runs regardless
                self.get(dep)
        if self._claim(job):
            self._run(key, job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result

    def _claim(self, job: _Job) -> bool:
        with self._cond:
            if job.state != "queued" or self._closed:
                return False
            job.state = "running"
            return True

    def _run(self, key: Any, job: _Job) -> None:
        _LABEL.value = f"{self.where}::{key} (ahead)"
        try:
            job.result = job.make()
        except BaseException as exc:  # noqa: BLE001 - pytest's skip and fail are BaseExceptions: each reader gets it
            job.error = exc
        finally:
            _LABEL.value = None
            with self._cond:
                job.state = "done"
                job.done.set()
                self._cond.notify_all()

    def _next(self) -> tuple[Any, _Job] | None:
        """The first queued job whose dependencies are done (claimed), or None once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                for key in self._order:
                    job = self._jobs[key]
                    if job.state == "queued" and all(self._jobs[d].state == "done" for d in job.after):
                        job.state = "running"
                        return key, job
                self._cond.wait()

    def _work(self) -> None:
        while (picked := self._next()) is not None:
            self._run(*picked)

    def close(self) -> None:
        """Queued starts are dropped (their readers are gone); running ones end first."""
        with self._cond:
            self._closed = True
            for job in self._jobs.values():
                if job.state == "queued":
                    job.state, job.error = "done", RuntimeError("the start pool closed before this start ran")
                    job.done.set()
            self._cond.notify_all()
        for t in self._workers:
            t.join()


class Later:
    """A start being made: its attributes are the result's, once it is there (``result()`` for the object)."""

    __slots__ = ("_key", "_pool")

    def __init__(self, pool: StartPool, key: Any) -> None:
        object.__setattr__(self, "_pool", pool)
        object.__setattr__(self, "_key", key)

    def result(self) -> Any:
        return self._pool.get(self._key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.result(), name, value)
