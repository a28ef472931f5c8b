"""What the patch points need of this process's start (the runtime provides it) and of the cause probes: small
Protocols, so that patching/ imports neither the runtime nor causes/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from vllm_otel_startup.agent.foundation.calls import Call


class CallProbes(Protocol):
    """The cause probes a row's ``probe=`` names (causes.Probes)."""

    def after_call(self, name: str | None, span: Any, call: Call) -> None: ...


class PatchHost(Protocol):
    """What the patch points need of this process's start (the runtime is one)."""

    info: Any  # foundation.process.ProcessInfo
    active: bool
    done: bool
    provider: Any  # the tracer provider
    process_span: Any  # this process's span: torch.compile regions outside any phase hang under it
    probes: CallProbes
    last_error: BaseException | None
    local: list[tuple[int, int, str, int, int | None, str | None]]  # ended startup spans (foundation.ledger)
    native_phases: dict[str, str]  # span name -> phase: vLLM's own spans under names we do not list
    native_effects: dict[str, Callable[[BaseException | None], None]]  # span name -> a row's effect at its end
    patch_applied: int
    patch_native: int
    patch_frameless: int
    patch_missing: list[str]
    patch_failed: list[str]

    def close_segment(self, at_ns: int, next_name: str | None = None) -> None: ...

    def next_start(self) -> None: ...

    def finish(self, error: BaseException | None = None, outcome: str | None = None,
               end_ns: int | None = None) -> None: ...

    def await_frontends(self, count: int) -> None: ...

    def fleet(self) -> dict[str, str]: ...
