"""The end of vLLM's CLI (the ``cli_main`` row), with no frame of ours under it.

A wrapper around ``vllm.entrypoints.cli.main:main`` is a Python frame under everything the CLI does, the imports
before its first log line included. That frame shifts the whole stack, and a loop deep in it can land on a boundary
of CPython's 16 KiB data-stack chunks, where each call maps and unmaps a chunk (cpython#142183; frameless.py): on
Python 3.11 it cost the API server many page faults and much main-thread CPU before its first line (measured in
docs/lab/overhead.md). So the row wraps nothing; the CLI's end is read where the interpreter reports it:

- an exception escaping the CLI reaches ``sys.excepthook``: ours, chained in front of the one in place, hands it on
  unchanged (the interpreter's report first), then fails the start with it;
- the console script's last line, ``sys.exit(main())``, ends a start still open when it calls ``sys.exit``: failed
  with that ``SystemExit`` for a status other than 0 or None, else failed with the last error a phase saw, or exited;
- ``sys.exit`` called anywhere else on the main thread (argparse's errors among others) with a status other than 0 or
  None is noted as the process's last error, unless a phase's is there (a later ``sys.exit(0)`` takes it back): a
  start that then leaves before ready is failed with it at the exit hook (``vllm_otel_startup._at_exit``). A
  ``raise SystemExit`` that passes no phase is seen only there, as an exit (``os._exit`` runs no exit hook at all).

Both are put back on uninstrument where they are still ours. A hook someone installs after ours wins, as it would
without us: the exit hook then still ends the start, failed where a phase saw the error. Only the process that
installed them, on its main thread, acts on them (a forked child inherits them).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from vllm_otel_startup.agent.foundation.guard import HOOKS, safe


class CliExit:
    """Installed once, in the process that imported vLLM's CLI (a forked child inherits the hooks; there they only
    hand on)."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.installed = False
        self._pid = 0
        self._excepthook: Any = sys.excepthook  # the ones in place before ours (kept: a copy of ours still calls them)
        self._exit: Any = sys.exit
        self._noted: SystemExit | None = None  # the non-zero status noted as the start's last error

    def install(self) -> CliExit:
        if not self._pid:  # never twice: a hook installed after ours and calling it would be chained to it
            self.installed, self._pid = True, os.getpid()
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

    def _mine(self) -> bool:
        return self.installed and os.getpid() == self._pid and threading.current_thread() is threading.main_thread()

    def excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: Any) -> Any:
        """An exception escaped the CLI: the interpreter's report first (the hook in place), then the start fails."""
        try:
            return self._excepthook(exc_type, exc, tb)
        finally:
            if self._mine():
                safe(HOOKS, self._failed, exc)

    def exit(self, status: Any = None) -> Any:
        """``sys.exit`` as it is. Called by the console script's own last line (``sys.exit(main())``: the CLI is over,
        as a wrapper around ``main`` saw it) it ends a start still open; called anywhere else on the main thread,
        a non-zero status is noted."""
        if self._mine():
            try:
                caller: Any = sys._getframe(1)
            except ValueError:  # called from no Python frame
                caller = None
            safe(HOOKS, self._on_exit, status, caller)
        return self._exit(status)

    def _on_exit(self, status: Any, caller: Any) -> None:
        script = caller is not None and caller.f_code.co_name == "<module>"
        if script and caller.f_globals.get("__name__") == "__main__":
            self._exited(status)
        else:
            self._note(status)

    def _failed(self, exc: BaseException) -> None:
        rt = self.rt
        if rt.active and not rt.done and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            rt.finish(error=exc)

    def _exited(self, status: Any) -> None:
        rt = self.rt
        if rt.active and not rt.done:
            error = SystemExit(status) if status not in (0, None) else rt.last_error
            rt.finish(error=error, outcome="failed" if error else "exited")

    def _note(self, status: Any) -> None:
        """A non-zero status becomes the last error unless a phase's is there; a later 0 takes back the one noted
        here (the first was caught)."""
        rt = self.rt
        if not rt.active or rt.done:
            return
        if status not in (0, None):
            if rt.last_error is None or rt.last_error is self._noted:
                self._noted = rt.last_error = SystemExit(status)
        elif self._noted is not None and rt.last_error is self._noted:
            self._noted = rt.last_error = None

