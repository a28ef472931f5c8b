"""The agent in a benchmark's venv: switched on through the environment alone (as deploy/adoption does for an
unchanged command, and as a child of ``opentelemetry-instrument`` inherits it), and our package byte-compiled as an
installed one is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def sitecustomize_dir(venv: Path) -> str:
    """OpenTelemetry's auto-instrumentation folder in ``venv`` (its sitecustomize)."""
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import os, opentelemetry.instrumentation."
                           "auto_instrumentation as a; print(os.path.dirname(a.__file__))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def byte_compile(venv: Path) -> str:
    """Byte-compile this project's package where ``venv``'s interpreter imports it from. An editable install has no
    bytecode, and a host that sets PYTHONDONTWRITEBYTECODE (this one does) never writes it: every instrumented
    process compiled our modules from source (~0.02-0.05 s each here), which an installed package, compiled by pip
    at install, never does. Returns the folder compiled."""
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import os, vllm_otel_startup as v; "
                            "print(os.path.dirname(v.__file__))"], capture_output=True, text=True, check=True)
    folder = where.stdout.strip()
    subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", folder], capture_output=True, check=True)
    return folder


def activation(site: str, pythonpath: str | None = None) -> dict[str, str]:
    """The agent switched on through the environment alone: what a child of `opentelemetry-instrument vllm serve`
    inherits, and what deploy/adoption sets for an unchanged command (OpenTelemetry's sitecustomize folder first on
    ``PYTHONPATH``, our distro and configurator)."""
    return {"PYTHONPATH": os.pathsep.join(p for p in (site, pythonpath) if p), "OTEL_PYTHON_DISTRO": "vllm_startup",
            "OTEL_PYTHON_CONFIGURATOR": "vllm_startup"}


def activated(env: dict[str, str], site: str) -> dict[str, str]:
    """``env`` with the agent switched on through it: the sitecustomize first on PYTHONPATH; an arm's own distro or
    configurator wins."""
    return {**activation(site, env.get("PYTHONPATH")), **{k: v for k, v in env.items() if k != "PYTHONPATH"}}
