"""A sampler meant for request traffic never splits or drops a start: until this process is ready every span is
sampled (the configured sampler decides again after ready); always_off still means no traces at all."""

from __future__ import annotations

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.trace import sampling

from vllm_otel_startup import semconv as sc


@pytest.mark.parametrize("configured", [sampling.TraceIdRatioBased(0.0),
                                        sampling.ParentBased(sampling.TraceIdRatioBased(0.0))],
                         ids=["traceidratio=0", "parentbased_traceidratio=0"])
def test_a_ratio_sampler_keeps_the_whole_start_and_decides_after_ready(otel, start, configured):
    provider, _ = otel
    provider.sampler = configured
    s = start("api_server", "0.32.0")
    assert s.rt.process_span.is_recording()  # the root: ours, made after the sampler was wrapped
    vllm = trace_api.get_tracer("vllm.api_server")  # vLLM's tracer
    with vllm.start_as_current_span("Load weights") as during:
        assert during.is_recording()
    s.rt.finish(outcome="ready")
    # traffic (a request without a traceparent: an empty context): the configured sampler's call
    with vllm.start_as_current_span("POST /v1/completions", context=Context()) as request:
        assert not request.is_recording()
    with vllm.start_as_current_span("Load weights") as later:  # a startup name after ready: never startup
        assert not later.is_recording()
    names = {x.name for x in s.spans()}
    assert {"Load weights", sc.ROOT_SPAN} <= names and "POST /v1/completions" not in names


def test_always_off_still_means_no_traces(otel, start):
    provider, _ = otel
    provider.sampler = sampling.ALWAYS_OFF
    s = start("api_server", "0.32.0")
    assert not s.rt.process_span.is_recording()
    with trace_api.get_tracer("vllm.api_server").start_as_current_span("Load weights") as span:
        assert not span.is_recording()
    assert s.spans() == []
