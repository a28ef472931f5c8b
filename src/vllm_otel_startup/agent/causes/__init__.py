"""Cause probes: the attributes that explain a phase's cost (the probe hooks are described in ``base.py``).

One module per probe family, imported only when a probe of that family is first needed (a process that never
compiles never loads ``compile.py``): ``config.py``, ``weights.py``, ``compile.py``, ``cudagraphs.py``, ``hub.py``.
This module holds the registry, the patch table's probe names (``probe=``) and the phases with a probe, each
mapped to ``"module:Class"``, and :class:`Probes`, which makes each probe on first use. It imports only the
standard library and ``base``: the agent imports it in every instrumented process.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

from vllm_otel_startup.agent.causes.base import Call, Probe, ProbeHost, filesystem_of, gb_per_s

__all__ = ["CALL_PROBES", "CALL_PROBE_NAMES", "PHASE_PROBES", "Call", "Probe", "Probes", "filesystem_of", "gb_per_s",
           "load"]

# the patch table's probe name (PatchPoint.probe) -> the probe that serves it (its ``name``, or one of its ``names``)
CALL_PROBES: dict[str, str] = {
    "config": "config:ConfigFacts",
    "model_inspection": "config:ModelInspection",
    "kv_cache_profile": "config:KvCacheProfile",
    "process_group": "config:ProcessGroup",
    "weights_loader": "weights:WeightsLoad",
    "prepare_weights": "weights:WeightsLoad",
    "weight_files": "weights:WeightsLoad",
    "streamer_request": "weights:WeightsLoad",
    "load_weights": "weights:WeightsLoad",
    "aot_load": "compile:AotLoad",
    "aot_save": "compile:AotSave",
    "compile_key": "compile:CompileKey",
    "aot_key_factors": "compile:AotLoad",
    "capture": "cudagraphs:Capture",
    "capture_mode": "cudagraphs:CaptureMode",
}
# a phase -> the probe around its spans (its ``phase``)
PHASE_PROBES: dict[str, str] = {
    "weights_load": "weights:WeightsLoad",
    "torch_compile": "compile:CompileCache",
    "weights_download": "hub:HubDownload",
    "cudagraph_capture": "cudagraphs:CudaGraphCount",
}
CALL_PROBE_NAMES = frozenset(CALL_PROBES)

def load(target: str) -> type[Probe]:
    """The probe class of a registry entry (``"module:Class"``), importing its family module."""
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


class Probes:
    """This process's probes, each made on first use of one of its names or its phase (its family module imported
    then), and the one fail-soft way to invoke them."""

    def __init__(self, rt: ProbeHost) -> None:
        from vllm_otel_startup import diagnostics  # standard library only, like this module

        self.rt = rt
        self.off = diagnostics.off("probes")
        self.all: list[Probe] = []  # the probes made so far
        self.by_name: dict[str, Probe | None] = {}  # patch-table probe name -> its probe (None: failed to load)
        self.by_phase: dict[str, Probe | None] = {}
        self._made: dict[str, Probe] = {}  # "module:Class" -> its one instance (WeightsLoad: five names, a phase)

    def reset(self) -> None:
        """A later start of this process (an embedded program's next engine): each probe is made anew on first use,
        with nothing of the last start's state (what the last ones installed is taken out first)."""
        self.uninstall()
        self.all, self.by_name, self.by_phase, self._made = [], {}, {}, {}

    def _probe(self, key: str, table: dict[str, str], cache: dict[str, Probe | None]) -> Probe | None:
        """The probe for ``key`` (a probe name or a phase), made (and its module imported) the first time."""
        if key in cache:
            return cache[key]
        target = table.get(key)
        if target is None or self.off:
            return None
        probe = self._made.get(target)
        if probe is None:
            try:
                made = load(target)()
            except Exception:  # noqa: BLE001 - a probe that fails to load only loses its attributes
                _failed(f"probe {target} (load)")
                cache[key] = None
                return None
            probe = self._made.setdefault(target, made)  # two threads at once: both keep the first one made
            if probe is made:
                self.all.append(made)
        cache[key] = probe
        return probe

    def _safe(self, probe: Probe | None, hook: str, *args: Any) -> None:
        if probe is None:
            return
        try:
            getattr(probe, hook)(self.rt, *args)
        except Exception:  # noqa: BLE001 - a probe that fails only loses its attributes
            _failed(f"probe {type(probe).__name__}.{hook}")

    def after_call(self, name: str | None, span: Any, call: Call) -> None:
        if call.kind is None:
            call = Call(call.instance, call.args, call.kwargs, call.result, name)
        self._safe(self._probe(name or "", CALL_PROBES, self.by_name), "after_call", span, call)

    def on_start(self, phase: str, span: Any) -> None:
        self._safe(self._probe(phase, PHASE_PROBES, self.by_phase), "on_start", span)

    def on_ending(self, phase: str, span: Any) -> None:
        self._safe(self._probe(phase, PHASE_PROBES, self.by_phase), "on_ending", span)

    def uninstall(self) -> None:
        for probe in list(self.all):
            with contextlib.suppress(Exception):
                probe.uninstall()


def _failed(what: str) -> None:
    from vllm_otel_startup.agent.foundation.guard import SPANS, failed  # standard library only; imported by then anyway

    failed(SPANS, what)
