"""What the patch points did in this process (patching/ writes it, the process span carries it at its end): the rows
applied, adopted (vLLM traces the call itself) and traced without a wrapper, those missing or failed, vLLM's own
spans under names we do not list, the effects run as such a span ends, the last error a watched call raised."""

from __future__ import annotations

from collections.abc import Callable


class PatchRecord:
    def __init__(self) -> None:
        self.patch_applied = 0
        self.patch_native = 0
        self.patch_frameless = 0  # of the applied: traced by sys.monitoring, no wrapper (patching/frameless.py)
        self.native_phases: dict[str, str] = {}  # span name -> phase: vLLM's own spans under names we do not list
        # vLLM's span name -> a ready or guard row's effect, run as that span ends (patching/wrappers.at_native_end)
        self.native_effects: dict[str, Callable[[BaseException | None], None]] = {}
        self.reset_failures()

    def reset_failures(self) -> None:
        """None missing, none failed, no error yet (a forked child starts its own record)."""
        self.patch_missing: list[str] = []
        self.patch_failed: list[str] = []
        self.last_error: BaseException | None = None
