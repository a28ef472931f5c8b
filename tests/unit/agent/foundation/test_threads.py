"""agent/threads.py: a helper thread started where Python may refuse one. At interpreter shutdown (Python >= 3.12
starts no new thread there) the caller is told so and does the work itself; any other refusal is raised."""

from __future__ import annotations

import threading

import pytest

from vllm_otel_startup.agent.foundation import threads


class _Refused(threading.Thread):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def start(self) -> None:
        raise RuntimeError(self.message)


def test_a_thread_starts_and_runs():
    ran = threading.Event()
    t = threading.Thread(target=ran.set)
    assert threads.start(t) is True
    t.join(5)
    assert ran.is_set()


def test_at_interpreter_shutdown_the_caller_is_told_instead_of_an_exception():
    assert threads.start(_Refused("can't create new thread at interpreter shutdown")) is False


def test_a_thread_limit_is_raised_as_before():
    with pytest.raises(RuntimeError, match="can't start new thread"):
        threads.start(_Refused("can't start new thread"))


def test_a_thread_of_ours_has_its_name_at_the_os_level():
    """/proc (top -H, py-spy, the overhead benchmark's per-thread CPU) shows our threads by name on every Python: `vos-`
    and its part, cut to the kernel's 15 bytes."""
    seen: list[str] = []

    def read() -> None:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            seen.append(f.read().strip())

    for name in ("vllm-otel-startup-sampler", "vllm-otel-startup-status-close"):
        t = threads.Thread(target=read, name=name, daemon=True)
        t.start()
        t.join(5)
    assert seen == ["vos-sampler", "vos-status-clos"]
    assert threading.current_thread().name == "MainThread"  # the Python names are ours to keep as they were
