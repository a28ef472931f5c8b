"""agent/foundation/fragments.py: vLLM's own spans outside any start are dropped, never exported as roots of their own
(issue 60); inside a start they hang under it; the operator's always_off still reads as off."""

from __future__ import annotations

from opentelemetry import context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased

from vllm_otel_startup.agent.export.processor import _switched_off
from vllm_otel_startup.agent.foundation import fragments


def _provider(sampler=ALWAYS_ON) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fragments.install(provider)
    fragments.install(provider)  # once
    return provider, exporter


def test_vllms_spans_outside_a_start_are_dropped_and_inside_one_kept():
    provider, exporter = _provider()
    token = context.attach(context.Context())  # no span current (one another test left behind would be a parent)
    vllm_tracer = provider.get_tracer("vllm.v1.executor.abstract")  # as vLLM's @instrument makes it
    code = {"code.namespace": "vllm.v1.executor.abstract"}
    with vllm_tracer.start_as_current_span("Executor init", attributes=code), \
            vllm_tracer.start_as_current_span("init_worker", attributes=code):  # under a dropped one: dropped too
        pass
    provider.get_tracer("vllm.tracing.otel").start_span("Dynamo bytecode transform").end()  # instrument_manual
    assert exporter.get_finished_spans() == ()
    ours = provider.get_tracer("vllm_otel_startup")
    with ours.start_as_current_span("vLLM startup"), \
            vllm_tracer.start_as_current_span("Executor init", attributes=code):  # in a start: under its root
        pass
    with provider.get_tracer("app").start_as_current_span("a request of the host's"):  # not vLLM's: kept
        pass
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["Executor init", "vLLM startup", "a request of the host's"]
    assert exporter.get_finished_spans()[0].parent.span_id == exporter.get_finished_spans()[1].context.span_id
    context.detach(token)


def test_the_filter_keeps_the_operators_always_off():
    provider, exporter = _provider(ParentBased(ALWAYS_OFF))
    assert _switched_off(provider.sampler)
    token = context.attach(context.Context())
    with provider.get_tracer("app").start_as_current_span("x"):
        pass
    assert exporter.get_finished_spans() == ()
    context.detach(token)
