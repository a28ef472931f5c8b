"""Our settings as ``opentelemetry-instrument`` options, and the distro choice when it launches vLLM.

``opentelemetry-instrument`` loads every ``opentelemetry_environment_variables`` entry point before it starts
the program: each ``OTEL_*`` attribute here becomes an option (``--vllm_startup_dir`` for
``OTEL_PYTHON_VLLM_STARTUP_DIR``) listed by ``--help``. The user-facing settings of settings.py, nothing else.

The same load is the only moment that runs before the SDK is configured in the first process. When the launcher
is about to start vLLM and the user named no distro or configurator, we name ours: with another distro installed
(opentelemetry-distro), the first entry point found would otherwise win, and which one that is depends on the
file system's listing order (docs/configuration.md). The children inherit the choice. Standard
library only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence

from vllm_otel_startup.settings import ALL

globals().update({s.name: s.name for s in ALL if not s.internal})

OURS = "vllm_startup"
SELECTORS = ("OTEL_PYTHON_DISTRO", "OTEL_PYTHON_CONFIGURATOR")


def launches_vllm(argv: Sequence[str]) -> bool:
    """``opentelemetry-instrument [options] vllm ...`` or ``... python -m vllm...``: the program is the launcher's
    first positional argument (every launcher option but ``-h``/``--version`` takes one value)."""
    if not argv or os.path.basename(argv[0]) != "opentelemetry-instrument":
        return False
    args, i = list(argv[1:]), 0
    while i < len(args) and args[i].startswith("-"):
        i += 1 if "=" in args[i] or args[i] in ("-h", "--help", "--version") else 2
    if i >= len(args):
        return False
    program, rest = os.path.basename(args[i]), args[i + 1:]
    if program == "vllm":
        return True
    return (program.startswith("python") and len(rest) > 1 and rest[0] == "-m"
            and rest[1].split(".")[0] == "vllm")


PLAIN = "opentelemetry.distro"  # opentelemetry-distro: OpenTelemetry's own, no vendor's


def vendor_distro() -> tuple[str, str | None, str] | None:
    """Another vendor's distro installed beside ours (Elastic EDOT, Splunk, Azure Monitor, ...): its distro entry
    point's name, its configurator's (same distribution), and the distribution's name; None when there is none."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="opentelemetry_distro"), key=lambda e: e.value):
        module = ep.value.split(":")[0]
        if module.split(".")[0] == "vllm_otel_startup" or module == PLAIN or module.startswith(PLAIN + "."):
            continue
        dist = ep.dist.name if ep.dist is not None else module
        configurators = [c.name for c in entry_points(group="opentelemetry_configurator")
                         if c.dist is not None and ep.dist is not None and c.dist.name == ep.dist.name]
        return ep.name, (configurators[0] if configurators else None), dist
    return None


def select_ours(environ: MutableMapping[str, str], argv: Sequence[str], err=None) -> bool:
    """Name our distro and configurator for a vLLM launch, unless the user named either (empty = unset). With a
    vendor's distro installed, name the vendor's instead: it stays in charge of exporters, resource and sampler,
    every process alike, and our hooks run on its tracer provider; one line says so."""
    if not launches_vllm(argv) or any((environ.get(k) or "").strip() for k in SELECTORS):
        return False
    vendor = vendor_distro()
    if vendor is not None:
        distro, configurator, dist = vendor
        environ["OTEL_PYTHON_DISTRO"] = distro
        if configurator:
            environ["OTEL_PYTHON_CONFIGURATOR"] = configurator
        print(f"vllm-otel-startup: {dist}'s distro configures OpenTelemetry here (its exporters, resource and "
              "sampler); vllm-otel-startup's hooks run on its tracer provider (OTEL_PYTHON_DISTRO=vllm_startup and "
              "OTEL_PYTHON_CONFIGURATOR=vllm_startup make ours configure it)", file=err or sys.stderr, flush=True)
        return False
    for k in SELECTORS:
        environ[k] = OURS
    return True


select_ours(os.environ, sys.argv)
