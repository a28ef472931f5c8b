"""Each phase span's own resource readings (agent/resources/span_resources.py): a snapshot as the span starts, the
difference to one as it ends, as the span's attributes; nothing without a sampler, or when the diagnostics switch
leaves the part out, and a forked child keeps none of its parent's open readings."""

from __future__ import annotations

import time

import pytest
from spans import ANY, RESOURCE, assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources.sampler import Sampler
from vllm_otel_startup.agent.resources.span_resources import SpanResources

ALWAYS = {sc.RES_CPU_TIME: ANY, sc.RES_CORES_AVG: ANY, sc.RES_SAMPLES: ANY}  # every summary has these (sampler.py)


@pytest.fixture
def resources(monkeypatch) -> SpanResources:
    monkeypatch.delenv("OTEL_PYTHON_VLLM_STARTUP_OFF", raising=False)
    r = SpanResources()
    r.sampler = Sampler(host=False)  # its snapshots only: no sampling thread
    return r


def busy(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def test_a_span_gets_the_readings_between_its_start_and_its_end(resources):
    resources.begin(7)
    busy(0.05)
    attrs = resources.end(7)
    assert_attributes(attrs, ALWAYS, allow=RESOURCE)
    assert attrs[sc.RES_CPU_TIME] >= 0.04  # this thread's CPU time over the span


def test_a_span_ends_with_readings_once(resources):
    resources.begin(7)
    assert resources.end(7)
    assert resources.end(7) == {}  # its start reading is gone: nothing is held past the span


def test_spans_are_read_apart(resources):
    resources.begin(1)
    busy(0.05)
    resources.begin(2)
    inner = resources.end(2)
    outer = resources.end(1)
    assert outer[sc.RES_CPU_TIME] > inner[sc.RES_CPU_TIME]


def test_a_span_never_begun_gets_nothing(resources):
    assert resources.end(99) == {}


def test_no_readings_without_a_sampler(monkeypatch):
    monkeypatch.delenv("OTEL_PYTHON_VLLM_STARTUP_OFF", raising=False)
    r = SpanResources()
    r.begin(1)
    assert r.end(1) == {}


def test_the_diagnostics_switch_leaves_the_readings_out(monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "span_resources")
    r = SpanResources()
    r.sampler = Sampler(host=False)
    assert r.off
    r.begin(1)
    assert r.end(1) == {}


def test_a_forked_child_keeps_none_of_its_parents_open_readings(resources):
    resources.begin(1)
    resources.forget()
    assert resources.end(1) == {}
    resources.begin(2)  # and reads its own spans as before
    assert_attributes(resources.end(2), ALWAYS, allow=RESOURCE)
