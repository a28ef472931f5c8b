"""Cause probes that count library calls (C++ builds, CUDA-graph captures), on stand-in modules."""

from __future__ import annotations

import sys
import types

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.cudagraphs import CudaGraphCount


class _Span:
    def __init__(self):
        self.attributes = {}

    def set_attribute(self, k, v):
        self.attributes[k] = v


def test_cuda_graph_captures_are_counted_on_the_capture_span(start, monkeypatch):
    """A stand-in torch.cuda.graphs (no GPU here): the count comes from CUDAGraph.capture_begin calls."""
    mod = types.ModuleType("torch.cuda.graphs")

    class CUDAGraph:
        def capture_begin(self, *a, **k):
            return None

    mod.CUDAGraph = CUDAGraph
    original = CUDAGraph.__dict__["capture_begin"]
    monkeypatch.setitem(sys.modules, "torch.cuda.graphs", mod)
    s = start("worker", "0.33.0")
    span = _Span()
    probe = CudaGraphCount()
    probe.on_start(s.rt, span)
    for _ in range(5):
        mod.CUDAGraph().capture_begin()
    probe.on_ending(s.rt, span)
    probe.uninstall()
    assert span.attributes == {sc.CUDAGRAPH_COUNT: 5}
    assert CUDAGraph.__dict__["capture_begin"] is original  # the counter is gone again


def test_no_torch_cuda_means_no_count_and_no_error(start, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch.cuda.graphs", raising=False)
    s = start("worker", "0.33.0")
    span = _Span()
    probe = CudaGraphCount()
    probe.on_start(s.rt, span)
    probe.on_ending(s.rt, span)
    assert span.attributes == {}
    assert "torch.cuda.graphs" not in sys.modules  # never imported by us
