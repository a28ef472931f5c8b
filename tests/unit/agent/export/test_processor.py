"""agent/export/processor.py: the span processor adopts vLLM's startup spans into our vocabulary (phase, process
kind, native) and leaves other spans alone; it scrubs what a span carries before it is exported; the startup
sampler keeps the whole start sampled until ready, then delegates and drops vLLM's startup-span names."""

from __future__ import annotations

import types

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, TraceIdRatioBased
from opentelemetry.trace import Status, StatusCode
from spans import assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.processor import StartupSampler, scrub_span
from vllm_otel_startup.model.redact import REDACTED


def test_vllms_startup_span_is_tagged_with_phase_kind_and_native(start):
    s = start("worker", "0.33.0")
    with trace_api.get_tracer("vllm.v1.worker.gpu_worker").start_as_current_span("Load weights"):
        pass
    [weights] = s.spans("Load weights")
    assert_attributes(weights, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "worker", sc.NATIVE: True})


def test_a_waiting_span_says_so_and_a_span_of_no_phase_is_left_alone(start):
    s = start("engine_core", "0.33.0")
    tracer = trace_api.get_tracer("vllm.v1.engine.core")
    with tracer.start_as_current_span("Worker wait ready"):
        pass
    with tracer.start_as_current_span("an unrelated span", attributes={"k": "v"}):
        pass
    [wait], [other] = s.spans("Worker wait ready"), s.spans("an unrelated span")
    assert_attributes(wait, {sc.PHASE: "worker_wait", sc.PROCESS_KIND: "engine_core", sc.NATIVE: True,
                             sc.WAITING: True})
    assert_attributes(other, {"k": "v"}, allow=())


def test_after_ready_nothing_is_adopted(start):
    s = start("worker", "0.33.0")
    s.rt.finish()
    with trace_api.get_tracer("vllm.v1.worker.gpu_worker").start_as_current_span("Allocate KV cache"):
        pass
    assert s.spans("Allocate KV cache") == []  # dropped by the startup sampler after ready


def test_scrub_span_removes_credentials_from_attributes_and_status():
    span = TracerProvider().get_tracer("t").start_span("s", attributes={
        "url": "https://user:hunter2@hub.example/models/m", "n": 3})
    span.set_status(Status(StatusCode.ERROR, "GET https://user:hunter2@hub.example failed"))
    scrub_span(span)
    assert "hunter2" not in span.attributes["url"] and REDACTED in span.attributes["url"]
    assert span.attributes["n"] == 3
    assert "hunter2" not in span.status.description and span.status.status_code is StatusCode.ERROR
    span.end()


def _rt(done: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(done=done, native_phases={"Weights loading": "weights_load"})


def _decision(sampler: StartupSampler, name: str) -> str:
    return sampler.should_sample(None, 0x1234, name).decision.name


def test_the_startup_sampler_keeps_the_start_whole_and_then_delegates():
    window = StartupSampler(TraceIdRatioBased(0.0), _rt(done=False))
    assert _decision(window, "anything") == "RECORD_AND_SAMPLE"  # a ratio of 0 would have dropped it
    window.rt = _rt(done=True)
    assert _decision(window, "Load weights") == "DROP" and _decision(window, "Weights loading") == "DROP"
    assert _decision(window, "POST /v1/completions") == "DROP"  # the ratio's decision now
    assert _decision(StartupSampler(ALWAYS_ON, _rt(done=True)), "POST /v1/completions") == "RECORD_AND_SAMPLE"
    assert window.get_description() == "VllmStartupWindow{TraceIdRatioBased{0.0}}"


def test_always_off_still_means_no_traces_during_the_start():
    assert _decision(StartupSampler(ALWAYS_OFF, _rt(done=False)), "Load weights") == "DROP"
