"""Cause probes of CUDA-graph capture: the graphs' memory and batch shapes per runtime mode (Capture,
CaptureMode) and the count of CUDAGraph.capture_begin calls during the capture span (CudaGraphCount)."""

from __future__ import annotations

from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call, Probe, ProbeHost
from vllm_otel_startup.agent.causes.call_counter import CallCounter


class Capture(Probe):
    """capture_model() -> bytes the graphs took (vLLM's own figure); the V2 runner's batch shapes per mode."""

    name = "capture"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if span is None:
            return
        if isinstance(call.result, int) and not isinstance(call.result, bool):
            span.set_attribute(sc.CUDAGRAPH_MEMORY, call.result)
        descs = getattr(getattr(call.instance, "cudagraph_manager", None), "_capture_descs", None)
        if isinstance(descs, dict):
            for mode, shapes in descs.items():
                key = {"FULL": sc.CUDAGRAPH_SHAPES_FULL, "PIECEWISE": sc.CUDAGRAPH_SHAPES_PIECEWISE}.get(
                    getattr(mode, "name", str(mode)))
                if key and hasattr(shapes, "__len__"):
                    span.set_attribute(key, len(shapes))


class CaptureMode(Probe):
    """_capture_cudagraphs(batch_descriptors, cudagraph_runtime_mode): one runtime mode's batch shapes."""

    name = "capture_mode"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if span is None:
            return
        mode, shapes = call.arg(1, "cudagraph_runtime_mode"), call.arg(0, "batch_descriptors")
        if mode is not None:
            span.set_attribute(sc.CUDAGRAPH_MODE, str(getattr(mode, "name", mode)))
        if hasattr(shapes, "__len__"):
            span.set_attribute(sc.CUDAGRAPH_SHAPES, len(shapes))


class CudaGraphCount(Probe):
    """Capture model: CUDAGraph.capture_begin calls during the span. Installed in the process that captures,
    when its capture span starts: torch.cuda is never touched elsewhere (never imported by us)."""

    phase = "cudagraph_capture"

    def __init__(self) -> None:
        self.captures = CallCounter("torch.cuda.graphs", "CUDAGraph.capture_begin")
        self.before = 0

    def on_start(self, rt: ProbeHost, span: Any) -> None:
        self.captures.install()
        self.before = self.captures.count

    def on_ending(self, rt: ProbeHost, span: Any) -> None:
        if self.captures.installed:
            span.set_attribute(sc.CUDAGRAPH_COUNT, self.captures.count - self.before)

    def uninstall(self) -> None:
        self.captures.uninstall()
