"""agent/assembly.py: one process's agent put together. On an SDK provider: our id generator (vLLM seeds Python's
global random), the startup sampler window around the user's sampler, our span processor and the hooks; on any
other provider only a tracer. ``undo()`` takes it apart, each step on its own, and gives the provider back its id
generator and sampler; a failing assembly takes apart what it built and raises."""

from __future__ import annotations

import os
import time

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from spans import assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import assembly
from vllm_otel_startup.agent.export.processor import StartupSampler, StartupSpanProcessor
from vllm_otel_startup.agent.foundation.ids import UrandomIdGenerator
from vllm_otel_startup.agent.foundation.process import ProcessInfo
from vllm_otel_startup.agent.runtime import Runtime


def _info(kind: str = "engine_core") -> ProcessInfo:
    now = time.time_ns()
    return ProcessInfo(kind=kind, pid=os.getpid(), create_ns=now - 1_000_000, create_source="proc", hook_ns=now,
                       argv=["vllm", "serve", "m"])


def _provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_an_sdk_provider_gets_our_ids_sampler_window_processor_and_undo_gives_them_back():
    provider, exporter = _provider()
    ids, sampler = provider.id_generator, provider.sampler
    built = assembly.assemble(_info(), provider, hooks=False)
    try:
        assert isinstance(provider.id_generator, UrandomIdGenerator)
        assert isinstance(provider.sampler, StartupSampler) and built.installer is None
        processors = provider._active_span_processor._span_processors  # noqa: SLF001 - what the SDK holds
        assert any(isinstance(p, StartupSpanProcessor) for p in processors)
        assert built.rt.active and built.rt.tracer is not None
        with trace_api.get_tracer("vllm.engine", tracer_provider=provider).start_as_current_span("Load weights"):
            pass
        [weights] = [s for s in exporter.get_finished_spans() if s.name == "Load weights"]
        # our processor adopted vLLM's span
        assert_attributes(weights, {sc.PHASE: "weights_load", sc.PROCESS_KIND: "engine_core", sc.NATIVE: True})
    finally:
        built.undo()
    assert provider.id_generator is ids and provider.sampler is sampler and not built.rt.active


def test_hooks_are_installed_on_request_and_uninstalled_by_undo(otel):
    provider, _ = otel
    built = assembly.assemble(_info("worker"), provider)
    try:
        assert built.installer is not None and built.installer.enabled
        assert built.installer.probes is built.probes and built.installer.rt is built.rt
    finally:
        built.undo()
    assert built.installer.enabled is False


class _OtherProvider:
    """A provider that is not the SDK's: it only makes tracers."""

    def get_tracer(self, *args, **kwargs):
        return trace_api.NoOpTracer()


def test_another_provider_gets_only_a_tracer():
    provider = _OtherProvider()
    built = assembly.assemble(_info(), provider, hooks=False)
    try:
        assert built.provider_state is None and not hasattr(provider, "sampler")
    finally:
        built.undo()


def test_a_failing_assembly_takes_apart_what_it_built_and_raises(monkeypatch):
    provider, _ = _provider()
    ids, sampler = provider.id_generator, provider.sampler
    stopped = []
    monkeypatch.setattr(Runtime, "start", lambda self: (_ for _ in ()).throw(OSError("planted")))
    monkeypatch.setattr(Runtime, "stop", lambda self: stopped.append(self))
    with pytest.raises(OSError, match="planted"):
        assembly.assemble(_info(), provider, hooks=False)
    assert len(stopped) == 1 and provider.id_generator is ids and provider.sampler is sampler


def test_each_undo_step_runs_even_when_one_before_it_fails(caplog):
    calls = []

    class _Part:
        def __init__(self, name: str, fail: bool = False) -> None:
            self.name, self.fail = name, fail

        def __call__(self):
            calls.append(self.name)
            if self.fail:
                raise RuntimeError(self.name)

    rt = type("Rt", (), {"stop": _Part("runtime")})()
    probes = type("P", (), {"uninstall": _Part("probes", fail=True)})()
    built = assembly.Assembly(rt, probes, None)
    built.installer = type("I", (), {"uninstall": _Part("hooks", fail=True)})()
    built.undo()
    assert calls == ["hooks", "probes", "runtime"]
