"""One patched call as a cause probe sees it: the patch wrappers (patching/) make it, the probes (causes/) read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """One patched call as a probe sees it, after it returned."""

    instance: Any
    args: tuple
    kwargs: dict
    result: Any
    kind: str | None = None  # the patch table's probe name that made this call

    def arg(self, index: int, name: str) -> Any:
        if name in self.kwargs:
            return self.kwargs[name]
        return self.args[index] if len(self.args) > index else None
