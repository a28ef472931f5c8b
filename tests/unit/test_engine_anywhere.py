"""An engine is a start wherever it is created (issue 60): a multiprocessing child of a program that is not vLLM's
server (``vllm bench startup`` builds each iteration's ``LLM`` in one) may become a start's root; vLLM's own
children never do; vLLM's own spans outside any start are dropped, never exported as roots of their own."""

from __future__ import annotations

import os
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased

from vllm_otel_startup.agent.export import fragments
from vllm_otel_startup.agent.export.processor import _switched_off
from vllm_otel_startup.agent.foundation.process import ENV_KIND, ENV_PARENT, OTHER, ProcessInfo, classify

SPAWNED = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
           "--multiprocessing-fork"]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _info(argv: list[str], environ: dict[str, str]) -> ProcessInfo:
    now = time.time_ns()
    return ProcessInfo(classify(argv, environ), os.getpid(), now, "proc", now, argv)


@pytest.mark.parametrize("argv, environ, may", [
    (SPAWNED, {}, True),  # a multiprocessing child of any program: vllm bench startup's iterations, a host's workers
    (["python", "script.py"], {}, True),  # a user's script
    (SPAWNED, {ENV_KIND: "engine_core", ENV_PARENT: TRACEPARENT}, False),  # vLLM's own child (a spawn patch point)
    (SPAWNED, {ENV_PARENT: TRACEPARENT}, False),  # handed a parent span: part of a start already
    (["python", "-m", "torch._inductor.compile_worker"], {}, False),  # a helper
    (["vllm", "serve", "m"], {}, False),  # the API server: a root by its command line
])
def test_who_may_start_an_engine_of_its_own(monkeypatch, argv, environ, may):
    for k in (ENV_KIND, ENV_PARENT):
        monkeypatch.delenv(k, raising=False)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    assert _info(argv, environ).may_embed() is may


def test_a_multiprocessing_child_without_vllms_marks_is_other():
    assert classify(SPAWNED, {}) == OTHER


def _provider(sampler=ALWAYS_ON) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fragments.install(provider)
    fragments.install(provider)  # once
    return provider, exporter


def test_vllms_spans_outside_a_start_are_dropped_and_inside_one_kept():
    provider, exporter = _provider()
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


def test_the_filter_keeps_the_operators_always_off():
    provider, exporter = _provider(ParentBased(ALWAYS_OFF))
    assert _switched_off(provider.sampler)
    with provider.get_tracer("app").start_as_current_span("x"):
        pass
    assert exporter.get_finished_spans() == ()
