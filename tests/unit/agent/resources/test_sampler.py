"""While a process imports it is one interpreter loading modules on the start's critical path, and every sampler
tick takes the GIL from it: it samples once a second until its first phase begins, then at SAMPLE_HZ (issue 25)."""

from __future__ import annotations

import time

from opentelemetry import trace as trace_api

from vllm_otel_startup.agent.resources import sampler as sampler_mod
from vllm_otel_startup.agent.resources.sampler import Sampler


def test_a_process_samples_once_a_second_until_its_first_phase(otel, start):
    s = start("engine_core", "0.33.0")
    assert s.rt.sampler.importing  # its imports segment is open
    with trace_api.get_tracer("vllm.engine").start_as_current_span("Load weights"):
        assert not s.rt.sampler.importing  # the first phase closed it: SAMPLE_HZ from the next tick


def test_an_importing_sampler_ticks_once_a_second_then_at_its_rate(monkeypatch):
    monkeypatch.setattr(sampler_mod, "IMPORTING_S", 30.0)  # a tick would come long after the test
    s = Sampler(host=False)
    s.start(importing=True)
    try:
        time.sleep(0.3)
        assert s.times == []  # a 10 Hz sampler would have ticked twice
        s.full_rate()  # ends the pending once-a-second wait: a phase shorter than a second is sampled too
        time.sleep(0.6)
        assert len(s.times) >= 3
    finally:
        s.stop_after(0)
        s.join(2)
