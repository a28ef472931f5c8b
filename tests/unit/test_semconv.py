"""semconv.py: the vocabulary's own rules. Every metric is described once (instrument, unit, labels, text); the
Prometheus names follow OpenTelemetry's OTLP translation; the phase sets are disjoint where they must be. (The
vocabulary against the patch table and docs/telemetry.md: tests/unit/behaviour/test_vocabulary_contract.py.)"""

from __future__ import annotations

import pytest

from vllm_otel_startup import semconv as sc

INSTRUMENTS = {"gauge", "counter", "updowncounter", "histogram"}


def test_every_metric_is_one_instrument_with_a_unit_labels_and_a_description():
    assert sc.METRICS == {**sc.STARTUP_METRICS, **sc.RESOURCE_METRICS, **sc.LIVE_METRICS}
    assert len(sc.METRICS) == len(sc.STARTUP_METRICS) + len(sc.RESOURCE_METRICS) + len(sc.LIVE_METRICS)
    for name, (kind, unit, labels, text) in sc.METRICS.items():
        assert kind in INSTRUMENTS and unit and text.strip(), name
        assert isinstance(labels, tuple) and len(set(labels)) == len(labels), name


@pytest.mark.parametrize(("name", "prom"), [
    ("vllm.startup.phase.last_duration", "vllm_startup_phase_last_duration_seconds"),
    ("vllm.startup.starts", "vllm_startup_starts_total"),  # a {start} unit has no suffix
    ("vllm.startup.weights.bytes", "vllm_startup_weights_bytes_total"),  # "bytes" already ends it
    ("vllm.startup.weights.load_time", "vllm_startup_weights_load_time_seconds_total"),
    ("process.memory.usage", "process_memory_usage_bytes"),
])
def test_prometheus_names_follow_the_otlp_translation(name, prom):
    assert sc.prom_name(name) == prom


def test_a_label_is_its_attribute_with_underscores():
    assert sc.prom_label(sc.PROCESS_KIND) == "vllm_startup_process_kind"
    assert {sc.prom_label(k) for k in sc.FLEET_LABELS} == {k.replace(".", "_") for k in sc.FLEET_LABELS}


def test_waits_are_waiting_phases_and_detail_phases_are_neither_waits_nor_bursts():
    assert sc.WAITS_ON_FRONT_END <= sc.WAITING_PHASES and sc.WAITS_ON_PEERS <= sc.WAITING_PHASES
    assert not sc.WAITS_ON_FRONT_END & sc.WAITS_ON_PEERS
    assert not sc.DETAIL_PHASES & (sc.WAITING_PHASES | sc.BURST_PHASES)
    assert not sc.DETAIL_PHASES & sc.METRIC_PHASES  # nested detail stays in the trace, not a series


def test_the_duration_buckets_rise_from_50_ms_to_30_minutes():
    b = sc.DURATION_BUCKETS
    assert b[0] == 0.05 and b[-1] == 1800 and list(b) == sorted(set(b))
