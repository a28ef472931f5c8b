"""Post-import hooks with no frame of ours under a module's import (Python >= 3.12).

wrapt's post-import hooks put a finder first on ``sys.meta_path`` and, for each module they wait for, a chained loader
whose ``exec_module`` is a Python frame under the module's whole execution, its nested imports included. That frame
shifts the stack of everything those imports run, and CPython maps and unmaps a 16 KiB data-stack chunk each time a
call lands on a chunk boundary (cpython#142183). These loaders' frames made most of the extra chunks the agent cost
vLLM's API server on Python 3.12 (measured: docs/lab/overhead-gpu.md).

Here a module's hooks run instead when importlib has loaded it (``_find_and_load_unlocked`` returns it:
``sysmon.import_code``), seen through ``sys.monitoring`` (agent/foundation/sysmon.py, the events the import watcher of
retro_spans.py already asks for): nothing of ours is on the stack while the module executes, and no finder of ours is
asked about every import. A module returned while it still initializes (a circular import's partial module, where an
interpreter has only ``_find_and_load`` to watch) waits for its own import's end. An older interpreter, no free tool
id or ``OTEL_PYTHON_VLLM_STARTUP_OFF=frameless`` keep wrapt's hooks. As with wrapt, a module imported already gets its
hook at once, a failed import gets none, and a hook runs once. A module imported inside a callback of ours, where
CPython reports no event, gets its hook as that callback ends (``sweep``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from vllm_otel_startup.agent.foundation import sysmon
from vllm_otel_startup.agent.foundation.guard import HOOKS, failed

Hook = Callable[[Any], None]


class _Imports:
    """The sysmon handler of ``sysmon.import_code()``: a module's import returned, its hooks run."""

    def __init__(self, code: Any) -> None:
        self.code = code  # sysmon.import_code()
        self.waiting: dict[str, list[Hook]] = {}  # module name -> hooks not run yet
        self.lock = threading.Lock()
        self.modules_seen = 0  # len(sys.modules) at the last sweep

    def forked(self) -> None:
        """A forked child: the lock may have been held by a thread it does not have (sysmon.reset_in_forked_child)."""
        self.lock = threading.Lock()

    def started(self, code: Any, frame: Any) -> None:
        return None

    def unwound(self, code: Any, exc: BaseException) -> None:
        return None

    def returned(self, code: Any, frame: Any, module: Any) -> None:
        name = getattr(module, "__name__", None)
        if name not in self.waiting:  # every module the process loads comes here: a dict lookup
            return
        if _initializing(module):
            return  # a circular import's partial module: its own import returns later
        self.run(name, module)
        sweep()  # what the hooks imported themselves (no events inside this callback)

    def run(self, name: str, module: Any) -> None:
        with self.lock:
            hooks = self.waiting.pop(name, ())
        for hook in hooks:
            try:
                hook(module)
            except Exception:  # noqa: BLE001 - a hook of ours never raises into vLLM's import
                failed(HOOKS, f"a post-import hook of {name}")


def _initializing(module: Any) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def sweep() -> None:
    """Run the hooks of the modules imported while ``sys.monitoring`` reported nothing: CPython suspends every event
    of a thread while one of its callbacks runs, so an import inside a callback of ours (a hook here, a frameless
    row's steps) never reaches ``returned``. Called as such a callback ends; a few dict lookups."""
    imports = _IMPORTS
    if imports is None or not imports.waiting or len(sys.modules) == imports.modules_seen:
        return  # nothing imported since the last sweep
    imports.modules_seen = len(sys.modules)
    for name in list(imports.waiting):
        module = sys.modules.get(name)
        if module is not None and not _initializing(module):
            imports.run(name, module)


_IMPORTS: _Imports | None = None


def _imports() -> _Imports | None:
    """This process's handler, watching importlib's loads from the first call on; None: wrapt's hooks here."""
    global _IMPORTS  # noqa: PLW0603 - one per process
    if _IMPORTS is None and sysmon.available():
        imports = _Imports(sysmon.import_code())
        if sysmon.events().watch(imports.code, imports):
            _IMPORTS = imports
            sysmon.reset_in_forked_child(imports)
    return _IMPORTS


def register(hook: Hook, name: str) -> None:
    """``hook(module)`` once module ``name`` is imported: now if it is (wrapt.register_post_import_hook's rule)."""
    imports = _imports()
    if imports is None:
        import wrapt

        wrapt.register_post_import_hook(hook, name)
        return
    with imports.lock:
        module = sys.modules.get(name)
        if module is None:
            imports.waiting.setdefault(name, []).append(hook)
    if module is not None:
        hook(module)


def reset() -> None:
    """Forget every hook not run yet and stop watching (uninstrument)."""
    global _IMPORTS  # noqa: PLW0603
    imports, _IMPORTS = _IMPORTS, None
    if imports is not None:
        with imports.lock:
            imports.waiting.clear()
        sysmon.events().unwatch(imports.code, imports)
