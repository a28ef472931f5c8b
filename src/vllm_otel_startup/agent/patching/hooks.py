"""Resolution of the patch-point table into wrapt wrappers, lazily, when each target module is imported
(patching/post_import.py: no frame of ours under the module's own import).

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

from opentelemetry import trace

from vllm_otel_startup import diagnostics
from vllm_otel_startup.agent.foundation import sysmon
from vllm_otel_startup.agent.foundation.guard import HOOKS, safe
from vllm_otel_startup.agent.foundation.kinds import API_SERVER
from vllm_otel_startup.agent.foundation.patch_points import SPAN_PHASES, PatchPoint, by_module
from vllm_otel_startup.agent.foundation.versions import vllm_version
from vllm_otel_startup.agent.foundation.wrapping import wrap
from vllm_otel_startup.agent.patching import frameless, helper_env, post_import, proctitle
from vllm_otel_startup.agent.patching.cli_exit import CliExit
from vllm_otel_startup.agent.patching.compile_stages import CompileStages
from vllm_otel_startup.agent.patching.wrappers import Hook, at_native_end, build

if TYPE_CHECKING:
    from vllm_otel_startup.agent.patching.host import CallProbes, PatchHost

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


_SPAN_CALLS = frozenset({"start_as_current_span", "start_span"})


def native_span(fn: Any, depth: int = 4) -> str | None:
    """The span name vLLM's own ``@instrument`` wrapper around ``fn`` opens ('' if unreadable), or None when ``fn``
    is not such a wrapper.

    Recognized by what the wrapper is, not by where vLLM keeps its tracing module (``vllm/tracing/otel.py`` up to
    0.33, ``vllm/foundation/observability/tracing/otel.py`` on vLLM main): a ``functools.wraps`` wrapper whose code
    is defined in a ``vllm`` module and asks an OpenTelemetry tracer for a span (it calls ``start_as_current_span``
    or ``start_span``, and a global it reads is an ``opentelemetry`` object). Other decorators on top of vLLM's are
    looked through (``__wrapped__``, a few levels). Attribute reads only: nothing is called."""
    try:
        for _ in range(depth):
            fn = getattr(fn, "__func__", fn)
            inner = getattr(fn, "__wrapped__", None)
            if inner is None:
                return None
            span = _vllm_span(fn)
            if span is not None:
                return span
            fn = inner
    except Exception:  # noqa: BLE001 - an odd object (a property that raises...) is simply not vLLM's wrapper
        return None
    return None


def _vllm_span(fn: Any) -> str | None:
    code, glb = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or not isinstance(glb, dict):
        return None
    module = glb.get("__name__")
    if not isinstance(module, str) or not (module == "vllm" or module.startswith("vllm.")):
        return None
    names = code.co_names
    if _SPAN_CALLS.isdisjoint(names) or not any(_is_otel(glb.get(n)) for n in names):
        return None
    cells = dict(zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False))
    texts = []
    for var, cell in cells.items():
        with contextlib.suppress(ValueError):  # an empty cell
            if isinstance(cell.cell_contents, str):
                texts.append((var != "final_span_name", "span" not in var, cell.cell_contents))
    return min(texts)[2] if texts else ""  # vLLM's variable first, then any *span* string


def _is_otel(obj: Any) -> bool:
    if obj is None:
        return False
    name = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None)
    return isinstance(name, str) and (name == "opentelemetry" or name.startswith("opentelemetry."))


def is_native(fn: Any) -> bool:
    """True when ``fn`` is wrapped by vLLM's own ``@instrument`` (see :func:`native_span`)."""
    return native_span(fn) is not None


def lands_here(provider: Any) -> bool:
    """vLLM's wrapper opens its span through the global tracer provider: it reaches our processor (and is adopted)
    only if that is the provider we were given, or none is set yet (a proxy: the SDK's, set at start-up)."""
    current = trace.get_tracer_provider()
    return provider is None or current is provider or type(current).__name__ == "ProxyTracerProvider"


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
# the hooks a start cannot do without (its children's identity, its ready point, its failure, its bootstrap segments,
# the CLI's exit): what OTEL_PYTHON_VLLM_STARTUP_OFF=phase_spans keeps
SKELETON_HOOKS = frozenset({"spawn", "ready", "guard", "marker", "cli_main"})


class Installer:
    def __init__(self, rt: PatchHost, tracer: trace.Tracer, version: str | None = None,
                 probes: CallProbes | None = None) -> None:
        self.rt = rt
        self.probes = probes if probes is not None else rt.probes
        self.version = version
        self.tracer = tracer
        self.enabled = True
        # row key (PatchPoint.key) -> applied | native | inherited | out_of_range | missing | error | off
        self.status: dict[str, str] = {}
        self._undo: list[tuple[Any, str, Any]] = []
        self.compile_stages: CompileStages | None = None
        self._title_kept = False  # proctitle.restore_first_env_string has run
        # span, ready, guard and enrich rows traced by sys.monitoring, not wrapped (Python >= 3.12: frameless.py)
        self.frameless = frameless.Monitor() if sysmon.available() else None
        self.cli_exit: CliExit | None = None  # the cli_main row: no wrapper (cli_exit.py)

    def install(self) -> None:
        if self.rt.info.kind != API_SERVER and diagnostics.off("child_hooks"):
            return  # diagnostics.OFF: an EngineCore or worker patches nothing
        skeleton = diagnostics.off("phase_spans")  # diagnostics: only what a start needs to begin, hand over and end
        for module, points in by_module().items():
            if skeleton:
                points = [p for p in points if p.hook in SKELETON_HOOKS]
                if not points:
                    continue
            post_import.register(lambda mod, pts=points: self.apply(mod, pts), module)
        if not diagnostics.off("helper_env"):
            post_import.register(self._install_helper_env, helper_env.MODULE)
        if diagnostics.off("compile_stages"):
            return
        self.compile_stages = CompileStages(self.rt, self.tracer)
        post_import.register(self._install_compile_stages, "torch._dynamo.utils")

    def _install_helper_env(self, module: Any) -> None:
        if self.enabled:
            safe(HOOKS, helper_env.install, module, self._undo)

    def _install_compile_stages(self, module: Any) -> None:
        if not self.enabled:
            return
        try:
            self.compile_stages.install(module)
        except Exception:  # noqa: BLE001
            _log.warning("vllm-otel-startup: could not trace torch.compile's stages; skipped", exc_info=True)

    def uninstall(self) -> None:
        self.enabled = False
        safe(HOOKS, post_import.reset)
        if self.compile_stages is not None:
            self.compile_stages.uninstall()
        for parent, name, original in reversed(self._undo):
            try:
                setattr(parent, name, original)
            except Exception:  # noqa: BLE001
                _log.debug("could not restore %s", name, exc_info=True)
        self._undo.clear()
        if self.frameless is not None:
            safe(HOOKS, self.frameless.remove_all)
        if self.cli_exit is not None:
            safe(HOOKS, self.cli_exit.uninstall)

    def apply(self, module: Any, points: list[PatchPoint]) -> None:
        """The post-import hook of ``module`` (it runs inside vLLM's import of it: nothing may escape)."""
        if not self._title_kept:  # the first: OpenTelemetry's sitecustomize is done, setproctitle not yet imported
            self._title_kept = True
            safe(HOOKS, proctitle.restore_first_env_string)
        if self.rt.info.kind != API_SERVER and diagnostics.off("child_wrappers"):
            return  # diagnostics.OFF: the post-import hooks fire, nothing is wrapped
        for point in points if self.enabled else ():
            try:
                self._apply_one(module, point)
            except Exception:  # noqa: BLE001 - a bad patch point is skipped, never raised
                safe(HOOKS, self._failed, point)

    def _failed(self, point: PatchPoint) -> None:
        """A target that was found but could not be wrapped: logged once, recorded on the process span as a
        missing one is (``vllm.startup.patch_points.failed``)."""
        self.status[point.key] = "error"
        self.rt.patch_failed.append(point.target)
        _log.warning("vllm-otel-startup: could not patch %s (%s pid %d); that phase is not traced", point.target,
                     self.rt.info.kind, os.getpid(), exc_info=True)

    def _apply_one(self, module: Any, point: PatchPoint) -> None:
        if diagnostics.off(f"row:{point.key}".lower()):  # diagnostics.OFF: this row is left out
            self.status[point.key] = "off"
            return
        ver = self.version or vllm_version()
        if not in_range(point.versions, ver):
            self.status[point.key] = "out_of_range"
            return
        found = _resolve(module, point.qualname)
        if found is None:
            self.status[point.key] = "missing"
            self.rt.patch_missing.append(point.target)
            _log.warning("vllm-otel-startup: %s not found in vLLM %s (%s pid %d); that phase is not traced",
                         point.target, ver, self.rt.info.kind, os.getpid())
            return
        parent, name, raw = found
        if raw is _INHERITED:
            self.status[point.key] = "inherited"
            return
        if point.hook == "cli_main":  # no frame of ours under the whole CLI: its end is read where Python reports it
            self.cli_exit = self.cli_exit or CliExit(self.rt).install()
            self.rt.patch_applied += 1
            self.status[point.key] = "applied"
            return
        marks = getattr(raw, _MARK, None) or ()
        if point.key in marks or (marks and point.hook != "since"):  # ours already (a since row wraps once more)
            self.status[point.key] = "applied"
            return
        span = native_span(raw)
        native = span is not None and lands_here(self.rt.provider)
        if span is not None and not native:
            _log.info("vllm-otel-startup: vLLM traces %s, but through another tracer provider; ours is kept",
                      point.target)
        if native:
            self.rt.patch_native += 1
            if span and span != point.span and span not in SPAN_PHASES and point.phase:
                self.rt.native_phases[span] = point.phase  # a name vLLM gave it that our table does not know yet
            if point.hook in ("span", "ctx"):  # nothing to add: vLLM's span is adopted by the processor
                self.status[point.key] = "native"
                return
            if point.hook in ("ready", "guard") and span:
                # no wrapper: a frame of ours under vLLM's call shifts its whole stack, and a loop deep in it can land
                # on a boundary of CPython's data-stack chunks (a chunk mapped and unmapped per call: cpython#142183).
                # The row's effect runs as vLLM's span ends (export/processor.py)
                effect = at_native_end(self.rt, point)
                if effect is not None:
                    self.rt.native_effects[span] = effect
                self.status[point.key] = "native"
                return
        func = getattr(raw, "__func__", raw)
        is_async = inspect.iscoroutinefunction(func)
        emit_span = bool(point.span) and not native
        if self.frameless is not None and safe(HOOKS, self.frameless.add, Hook(
                self.rt, self.tracer, self.probes, point, emit_span, is_async), raw, default=False):
            self.rt.patch_applied += 1
            self.rt.patch_frameless += 1
            self.status[point.key] = "native" if native else "applied"
            return

        def restore() -> None:  # a "once" hook puts the original back after its first call
            with contextlib.suppress(Exception):
                setattr(parent, name, raw)

        wrapper = self._wrapper(point, emit_span=emit_span, is_async=is_async, restore=restore)
        wrap(parent, name, wrapper)
        new = vars(parent)[name] if inspect.isclass(parent) else getattr(parent, name)
        with contextlib.suppress(Exception):
            setattr(new, _MARK, (*marks, point.key))
        self._undo.append((parent, name, raw))
        self.rt.patch_applied += 1
        self.status[point.key] = "native" if native else "applied"

    def _wrapper(self, point: PatchPoint, emit_span: bool, is_async: bool, restore: Any = None) -> Any:
        """The wrapt wrapper for ``point``: built by its hook kind's builder."""
        return build(Hook(self.rt, self.tracer, self.probes, point, emit_span, is_async, restore))
