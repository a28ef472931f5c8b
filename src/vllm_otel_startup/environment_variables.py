"""Our settings as ``opentelemetry-instrument`` options, and the distro choice when it launches vLLM.

``opentelemetry-instrument`` loads every ``opentelemetry_environment_variables`` entry point before it starts
the program: each ``OTEL_*`` attribute here becomes an option (``--vllm_startup_dir`` for
``OTEL_PYTHON_VLLM_STARTUP_DIR``) listed by ``--help``. The user-facing settings of settings.py, nothing else.

The same load is the only moment that runs before the SDK is configured in the first process. When the launcher
is about to start vLLM and the user named no distro or configurator, we name ours: with another distro installed
(opentelemetry-distro), the first entry point found would otherwise win, and which one that is depends on the
file system's listing order (docs/telemetry.md, "Configuration"). The children inherit the choice. Standard
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


def select_ours(environ: MutableMapping[str, str], argv: Sequence[str]) -> bool:
    """Name our distro and configurator for a vLLM launch, unless the user named either (empty = unset)."""
    if not launches_vllm(argv) or any((environ.get(k) or "").strip() for k in SELECTORS):
        return False
    for k in SELECTORS:
        environ[k] = OURS
    return True


select_ours(os.environ, sys.argv)
