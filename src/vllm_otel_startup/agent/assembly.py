"""The agent of one process, put together in one place: the runtime, its span processor and cause probes on the
tracer provider, and (optionally) the patch-point hooks. ``VllmStartupInstrumentor`` assembles it; the benchmark
scripts and tests use the same ``assemble()`` rather than wiring the parts by hand, and ``undo()`` takes it apart
again (uninstrument)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from vllm_otel_startup.semconv import INSTRUMENTATION_NAME
from vllm_otel_startup.version import __version__

if TYPE_CHECKING:
    from vllm_otel_startup.agent.causes import Probes
    from vllm_otel_startup.agent.foundation.process import ProcessInfo
    from vllm_otel_startup.agent.patching.hooks import Installer
    from vllm_otel_startup.agent.runtime import Runtime

_log = logging.getLogger("vllm_otel_startup")


class Assembly:
    """One process's agent: what ``undo()`` takes apart, in reverse order."""

    def __init__(self, rt: Runtime, probes: Probes, provider_state: tuple[Any, Any, Any] | None) -> None:
        self.rt, self.probes = rt, probes
        self.installer: Installer | None = None
        self.provider_state = provider_state  # (provider, its id generator, its sampler) before we replaced them

    def undo(self) -> None:
        """Hooks, compile-stage wrappers, probe counters, the runtime (watchers, context, sampler thread), the
        provider's id generator and sampler; each step on its own (one that fails is logged at DEBUG)."""
        state = self.provider_state
        for step in (self.installer.uninstall if self.installer is not None else None, self.probes.uninstall,
                     self.rt.stop, (lambda: _restore_provider(*state)) if state is not None else None):
            if step is None:
                continue
            try:
                step()
            except Exception:  # noqa: BLE001
                _log.debug("vllm-otel-startup: uninstrument step failed", exc_info=True)


def assemble(info: ProcessInfo, provider: Any, *, hooks: bool = True) -> Assembly:
    """This process's agent on ``provider`` (an SDK provider gets our id generator, the startup sampler window and
    our span processor; another provider only a tracer), started; ``hooks=False`` leaves vLLM unpatched. A failure
    takes apart what was built and is raised."""
    from vllm_otel_startup.agent.export.processor import StartupSampler, StartupSpanProcessor
    from vllm_otel_startup.agent.runtime import Runtime

    state: tuple[Any, Any, Any] | None = None
    window: StartupSampler | None = None
    from vllm_otel_startup import diagnostics

    # diagnostics.OFF: span_processor leaves an SDK provider as it is, as any other provider is
    sdk = hasattr(provider, "add_span_processor") and not diagnostics.off("span_processor")
    if sdk:
        from vllm_otel_startup.agent.foundation.ids import UrandomIdGenerator

        sampler = getattr(provider, "sampler", None)
        state = (provider, getattr(provider, "id_generator", None), sampler)
        # vLLM seeds Python's global random (set_random_seed): the SDK's default ids would repeat
        provider.id_generator = UrandomIdGenerator()
        if sampler is not None:  # tracers made from now on (ours below; vLLM makes one per call) use it
            provider.sampler = window = StartupSampler(sampler)
    tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=provider)
    rt = Runtime(info, tracer, provider)
    built = Assembly(rt, rt.probes, state)
    try:
        if window is not None:
            window.rt = rt
        if sdk:  # an SDK provider cannot drop a span processor: undo() makes it inert (rt.active False)
            provider.add_span_processor(StartupSpanProcessor(rt, built.probes))
        rt.start()
        if hooks:
            from vllm_otel_startup.agent.patching.hooks import Installer

            built.installer = Installer(rt, tracer, probes=built.probes)
            built.installer.install()
    except BaseException:
        built.undo()
        raise
    return built


def _restore_provider(provider: Any, id_generator: Any, sampler: Any) -> None:
    if id_generator is not None:
        provider.id_generator = id_generator
    if sampler is not None:
        provider.sampler = sampler
