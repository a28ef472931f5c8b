"""A call counter a cause probe installs lazily on a library function (C++ builds, CUDA-graph captures)."""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

_ABSENT = object()


class CallCounter:
    """Counts calls of ``module:qualname`` from ``install()`` on, in this process only. Installed lazily, once,
    by the phase that needs it (the module is loaded by then); ``uninstall()`` puts the original back."""

    def __init__(self, module: str, qualname: str) -> None:
        self.module, self.qualname = module, qualname
        self.count = 0
        self.installed: bool | None = None  # None: not tried yet; False: the target is absent
        self._lock = threading.Lock()
        self._undo: tuple[Any, str, Any] | None = None

    def install(self) -> bool:
        if self.installed is None:
            self.installed = False
            mod = sys.modules.get(self.module)
            owner_name, attr = self.qualname.split(".")[0], self.qualname.split(".")[-1]
            owner = getattr(mod, owner_name, None) if mod is not None else None
            if owner is not None and hasattr(owner, attr):
                from vllm_otel_startup.agent.foundation.wrapping import wrap

                self._undo = (owner, attr, vars(owner).get(attr, _ABSENT))
                wrap(mod, self.qualname, self._counted)
                self.installed = True
        return self.installed

    def _counted(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        with self._lock:
            self.count += 1
        return wrapped(*args, **kwargs)

    def uninstall(self) -> None:
        if self._undo is not None:
            owner, attr, original = self._undo
            with contextlib.suppress(Exception):
                if original is _ABSENT:  # it was inherited: drop the wrapper, the base's attribute shows again
                    delattr(owner, attr)
                else:
                    setattr(owner, attr, original)
            self._undo = None
        self.installed = None
