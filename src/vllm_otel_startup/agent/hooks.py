"""Resolution of the patch-point table into wrapt wrappers, lazily, when each target module is imported.

A target that vLLM already traces itself gets no second span (only its side effects: ready, spawn);
a target inherited from a base class is left to the base's row; a target absent from a version that
should define it (``missing``), or found but impossible to wrap (``failed``), is logged once and recorded on the
process span. Nothing here raises into vLLM.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry import trace

from vllm_otel_startup.agent import causes
from vllm_otel_startup.agent.compile_stages import CompileStages
from vllm_otel_startup.agent.guard import HOOKS, safe
from vllm_otel_startup.agent.patch_points import PatchPoint, by_module
from vllm_otel_startup.agent.versions import vllm_version
from vllm_otel_startup.agent.wrappers import Hook, build

if TYPE_CHECKING:
    from vllm_otel_startup.agent.runtime import Runtime

_log = logging.getLogger("vllm_otel_startup")
_MARK = "_self_vllm_otel_startup"


def in_range(spec: str, ver: str | None) -> bool:
    if ver is None:
        return True
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(Version(ver).base_version) in SpecifierSet(spec)
    except InvalidVersion:
        return True


def is_native(fn: Any) -> bool:
    """True when ``fn`` is wrapped by vLLM's own ``@instrument`` (vllm/tracing/otel.py)."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    return (
        getattr(fn, "__wrapped__", None) is not None
        and code is not None
        and code.co_filename.replace(os.sep, "/").endswith("tracing/otel.py")
    )


def _resolve(module: Any, qualname: str) -> tuple[Any, str, Any] | None:
    """(parent, attribute, raw object) with the raw object taken from the owner's own __dict__."""
    parent = module
    parts = qualname.split(".")
    for part in parts[:-1]:
        parent = getattr(parent, part, None)
        if parent is None:
            return None
    name = parts[-1]
    if inspect.isclass(parent):
        if name not in vars(parent):
            return (parent, name, _INHERITED) if hasattr(parent, name) else None
        return parent, name, vars(parent)[name]
    if not hasattr(parent, name):
        return None
    return parent, name, getattr(parent, name)


_INHERITED = object()


class Installer:
    def __init__(self, rt: Runtime, tracer: trace.Tracer, version: str | None = None,
                 probes: causes.Probes | None = None) -> None:
        self.rt = rt
        self.probes = probes if probes is not None else causes.Probes(rt)
        self.version = version
        self.tracer = tracer
        self.enabled = True
        self.status: dict[str, str] = {}  # target -> applied | native | inherited | out_of_range | missing | error
        self._undo: list[tuple[Any, str, Any]] = []
        self.compile_stages: CompileStages | None = None

    def install(self) -> None:
        for module, points in by_module().items():
            wrapt.register_post_import_hook(lambda mod, pts=points: self.apply(mod, pts), module)
        self.compile_stages = CompileStages(self.rt, self.tracer)
        wrapt.register_post_import_hook(self._install_compile_stages, "torch._dynamo.utils")

    def _install_compile_stages(self, module: Any) -> None:
        if not self.enabled:
            return
        try:
            self.compile_stages.install(module)
        except Exception:  # noqa: BLE001
            _log.warning("vllm-otel-startup: could not trace torch.compile's stages; skipped", exc_info=True)

    def uninstall(self) -> None:
        self.enabled = False
        if self.compile_stages is not None:
            self.compile_stages.uninstall()
        for parent, name, original in reversed(self._undo):
            try:
                setattr(parent, name, original)
            except Exception:  # noqa: BLE001
                _log.debug("could not restore %s", name, exc_info=True)
        self._undo.clear()

    def apply(self, module: Any, points: list[PatchPoint]) -> None:
        """The post-import hook of ``module`` (it runs inside vLLM's import of it: nothing may escape)."""
        for point in points if self.enabled else ():
            try:
                self._apply_one(module, point)
            except Exception:  # noqa: BLE001 - a bad patch point is skipped, never raised
                safe(HOOKS, self._failed, point)

    def _failed(self, point: PatchPoint) -> None:
        """A target that was found but could not be wrapped: logged once, recorded on the process span as a
        missing one is (``vllm.startup.patch_points.failed``)."""
        self.status[point.target] = "error"
        self.rt.patch_failed.append(point.target)
        _log.warning("vllm-otel-startup: could not patch %s (%s pid %d); that phase is not traced", point.target,
                     self.rt.info.kind, os.getpid(), exc_info=True)

    def _apply_one(self, module: Any, point: PatchPoint) -> None:
        ver = self.version or vllm_version()
        if not in_range(point.versions, ver):
            self.status[point.target] = "out_of_range"
            return
        found = _resolve(module, point.qualname)
        if found is None:
            self.status[point.target] = "missing"
            self.rt.patch_missing.append(point.target)
            _log.warning("vllm-otel-startup: %s not found in vLLM %s (%s pid %d); that phase is not traced",
                         point.target, ver, self.rt.info.kind, os.getpid())
            return
        parent, name, raw = found
        if raw is _INHERITED:
            self.status[point.target] = "inherited"
            return
        if getattr(raw, _MARK, None):
            self.status[point.target] = "applied"
            return
        native = is_native(raw)
        if native:
            self.rt.patch_native += 1
            if point.hook in ("span", "ctx"):  # nothing to add: vLLM's span is adopted by the processor
                self.status[point.target] = "native"
                return
        func = getattr(raw, "__func__", raw)
        is_async = inspect.iscoroutinefunction(func)

        def restore() -> None:  # a "once" hook puts the original back after its first call
            with contextlib.suppress(Exception):
                setattr(parent, name, raw)

        wrapper = self._wrapper(point, emit_span=bool(point.span) and not native, is_async=is_async,
                                restore=restore)
        wrapt.wrap_function_wrapper(parent, name, wrapper)
        new = vars(parent)[name] if inspect.isclass(parent) else getattr(parent, name)
        with contextlib.suppress(Exception):
            setattr(new, _MARK, point.target)
        self._undo.append((parent, name, raw))
        self.rt.patch_applied += 1
        self.status[point.target] = "native" if native else "applied"

    def _wrapper(self, point: PatchPoint, emit_span: bool, is_async: bool, restore: Any = None) -> Any:
        """The wrapt wrapper for ``point``: built by its hook kind's builder."""
        return build(Hook(self.rt, self.tracer, self.probes, point, emit_span, is_async, restore))
