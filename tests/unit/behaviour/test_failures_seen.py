"""Failures that nobody saw: an internal error at the ready point (publish, printout), in the exit hook or in
the resource sampler is one WARNING per process, with its traceback, and loses only its own work."""

from __future__ import annotations

import logging
import types

import pytest

from vllm_otel_startup.agent.foundation import guard


@pytest.fixture(autouse=True)
def _fresh_guard():
    guard.reset()
    yield
    guard.reset()


def _internal_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "internal error" in r.getMessage()]


def test_a_failing_publish_at_the_ready_point_is_one_warning_and_loses_only_itself(start, monkeypatch, caplog):
    from vllm_otel_startup.agent.export import ready, spool

    st = start("worker")
    written = []
    monkeypatch.setattr(spool, "write", lambda *a: written.append(a) or 1 / 0)
    recorded = []
    st.rt.recorder = types.SimpleNamespace(record=recorded.append)
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        for _ in range(3):
            ready.publish(st.rt)
    assert len(written) == 3 and len(recorded) == 3  # the metrics were recorded all the same
    (w,) = _internal_warnings(caplog)
    assert guard.READY in w.getMessage() and isinstance(w.exc_info[1], ZeroDivisionError)


def test_a_failing_printout_at_the_ready_point_is_one_warning(start, monkeypatch, caplog):
    from vllm_otel_startup.agent.export import ready
    from vllm_otel_startup.model import summary

    st = start("api_server")
    monkeypatch.setattr(summary, "render", lambda *a, **k: {}["no such phase"])
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        ready.print_summary(st.rt)
        ready.print_summary(st.rt)
    (w,) = _internal_warnings(caplog)
    assert "printed breakdown" in w.getMessage() and isinstance(w.exc_info[1], KeyError)


def test_a_failing_exit_hook_is_one_warning_never_an_exception(start, monkeypatch, caplog):
    from vllm_otel_startup import _at_exit

    st = start("worker")
    monkeypatch.setattr(st.rt, "finish", lambda **k: 1 / 0)
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        _at_exit(st.rt)
        _at_exit(st.rt)
    (w,) = _internal_warnings(caplog)
    assert guard.EXIT in w.getMessage()


def test_a_sampler_that_stops_on_an_error_says_so_once(monkeypatch, caplog):
    from vllm_otel_startup.agent.resources.sampler import Sampler

    s = Sampler(host=False)
    monkeypatch.setattr(s, "_sample", lambda *a: 1 / 0)
    s.hz, s.busy_s = 200.0, 0.0  # its first tick at once
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        s.start()
        s.join(2.0)
    assert s.stopped
    (w,) = _internal_warnings(caplog)
    assert guard.SAMPLER in w.getMessage()
