"""The one way our code runs inside a vLLM process: guarded, and seen when it fails.

Every step of ours that runs on vLLM's threads or on the way to its ready point (a wrapper's work around a
patched call, the span processor, the cause probes, the ready point's publish and printout, the exit hook)
goes through :func:`safe`, or reports the exception its own ``except`` caught through :func:`failed`. An
``Exception`` raised by our step is swallowed: the host never sees it and vLLM's own result or exception is
what its caller gets. (``KeyboardInterrupt`` and other non-``Exception`` errors are not ours to swallow: a
signal that arrives while our step runs would have arrived in vLLM's code just the same.)

A failure is never silent: the first one of each area in a process is logged at WARNING with its traceback,
later ones of that area at DEBUG, so a step that fails on every call costs one warning per process, not one
per call. A forked child starts with a clean slate (it is another process).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("vllm_otel_startup")

# areas: one WARNING per process each
HOOKS = "patched call"  # a wrapper's steps around a vLLM call (wrappers.py)
SPANS = "span processing"  # the span processor and the cause probes (processor.py, causes/)
SAMPLER = "resource sampler"  # its thread stopped on an error: the resource series and summaries end there
READY = "ready point"  # what a process publishes when its start ends: metrics, spool, /metrics, the printout
EXIT = "exit"  # a process that leaves before its ready point (__init__._at_exit)

# area -> the call that reported first. No lock: a collection can start inside this very function (any allocation)
# and run our gc callback, whose own report would then wait for a lock its thread holds (a unit test hung there);
# dict.setdefault with a str key is atomic under the GIL, so exactly one call per area sees its own token back
_warned: dict[str, object] = {}


def failed(area: str, what: Any = None) -> None:
    """Report the exception being handled (call it from an ``except`` block): WARNING the first time in this
    process for ``area``, DEBUG after. Never raises, even where logging itself fails."""
    try:
        token = object()
        first = _warned.setdefault(area, token) is token
        name = what if isinstance(what, str) else getattr(what, "__qualname__", None) or type(what).__name__
        if first:
            _log.warning("vllm-otel-startup: internal error in the %s (%s); that step was skipped and vLLM is "
                         "unaffected (further internal errors there are logged at DEBUG)", area, name,
                         exc_info=True)
        else:
            _log.debug("vllm-otel-startup: internal error in the %s (%s)", area, name, exc_info=True)
    except Exception:  # noqa: BLE001, S110 - a broken logging setup must not turn a report into a raise
        pass


def safe(area: str, fn: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or ``default`` when it raises (reported through :func:`failed`)."""
    try:
        return fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - ours never raises into vLLM
        failed(area, fn)
        return default


def reset() -> None:
    """Forget which areas have warned (a forked child; tests)."""
    _warned.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset)
