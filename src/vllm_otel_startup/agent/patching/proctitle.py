"""Keeps vLLM's process titles (``VLLM::EngineCore``, ``VLLM::Worker``...) working under OpenTelemetry's bootstrap.

OpenTelemetry's sitecustomize rewrites ``PYTHONPATH`` in every process it starts in (its directory out while it
initialises, back in after: ``auto_instrumentation.initialize``). glibc's ``setenv`` gives the variable a new string
on the heap. Where ``PYTHONPATH`` is the first variable of the environment, setproctitle (vLLM names its processes
with it) walks back from that first string to find ``argv``, fails, and the process keeps its interpreter's name in
``ps``, ``top`` and ``/proc``. Where the rewritten first string reads the same as the one the kernel laid out (the
usual case: the directory was first and is put back first), its pointer is put back to the kernel's string: the
environment is unchanged and setproctitle finds ``argv`` again. Linux only; anything unexpected leaves it as it is.
"""

from __future__ import annotations

import logging
import os
import sys

_log = logging.getLogger(__name__)
_ENV_START_FIELD = 50  # /proc/PID/stat: env_start, where the kernel put the environment's strings (Linux >= 3.5)


def env_start() -> int | None:
    """The address of the first environment string the kernel laid out for this process."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        after_comm = stat[stat.rindex(b")") + 2:].split()  # fields 3, 4, ...
        return int(after_comm[_ENV_START_FIELD - 3]) or None
    except (OSError, ValueError, IndexError):
        return None


def restore_first_env_string() -> bool:
    """Point ``environ[0]`` back at the kernel's first string where a rewrite left the same text elsewhere; True
    where it did. Run after OpenTelemetry's sitecustomize has finished (it rewrites ``PYTHONPATH`` twice) and before
    setproctitle is first imported: a post-import hook on vLLM's modules is both."""
    if not sys.platform.startswith("linux") or next(iter(os.environ), None) != "PYTHONPATH":
        return False  # os.environ keeps the order the process started with: only a first PYTHONPATH is rewritten
    start = env_start()
    if start is None:
        return False
    import ctypes

    try:
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
        first = environ[0] if environ else None
        if not first or first == start:
            return False
        if ctypes.string_at(first) != ctypes.string_at(start):  # another value, or the kernel's area reused
            return False
        environ[0] = start
    except (OSError, ValueError, AttributeError):
        _log.debug("vllm-otel-startup: could not look at the environment's first string", exc_info=True)
        return False
    return True
