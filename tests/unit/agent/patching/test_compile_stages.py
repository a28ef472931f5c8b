"""agent/compile_stages.py: PyTorch's own torch.compile regions (the real dynamo_timed of the installed torch) become
spans nested under the phase that was current, named as PyTorch names them; a region shorter than 1 ms has no
span; an exception leaving a region is an attribute, not an error; regions after ready are not startup."""

from __future__ import annotations

import time

import pytest
from spans import assert_attributes

from vllm_otel_startup import semconv as sc


def _phase_span(rt, name="Load model"):
    return rt.tracer.start_as_current_span(name)


def test_pytorch_compile_regions_become_nested_spans_under_the_current_phase(start):
    torch_utils = pytest.importorskip("torch._dynamo.utils")  # the real dynamo_timed of the installed torch
    st = start("worker")
    with _phase_span(st.rt, "Loading (CPU)"), torch_utils.dynamo_timed("outer_region"):
        with torch_utils.dynamo_timed("inner_region"):
            time.sleep(0.003)
        with torch_utils.dynamo_timed("tiny_region"):  # < 1 ms: no span of its own
            pass
    by = {s.name: s for s in st.spans()}
    outer, inner = by["outer_region"], by["inner_region"]
    assert "tiny_region" not in by
    assert inner.parent.span_id == outer.context.span_id
    assert outer.parent.span_id == by["Loading (CPU)"].context.span_id
    assert_attributes(inner, {sc.PROCESS_KIND: "worker", sc.PHASE: "torch_compile_stage",
                              sc.COMPILE_REGION: "inner_region"})
    assert inner.end_time - inner.start_time >= 3_000_000


def test_a_region_left_by_an_exception_is_an_attribute_not_an_error(start):
    torch_utils = pytest.importorskip("torch._dynamo.utils")
    st = start("worker")
    with _phase_span(st.rt), pytest.raises(KeyError), torch_utils.dynamo_timed("failing_region"):
        time.sleep(0.002)
        raise KeyError("graph break")
    (span,) = st.spans("failing_region")
    assert_attributes(span, {sc.PROCESS_KIND: "worker", sc.PHASE: "torch_compile_stage",
                             sc.COMPILE_REGION: "failing_region",
                             sc.COMPILE_REGION_EXCEPTION: "KeyError"})
    assert span.status.is_ok


def test_regions_after_ready_are_not_startup(start):
    torch_utils = pytest.importorskip("torch._dynamo.utils")
    st = start("worker")
    st.rt.done = True
    with torch_utils.dynamo_timed("runtime_recompile"):
        time.sleep(0.002)
    assert st.spans("runtime_recompile") == []


def test_a_regions_plain_metadata_becomes_torch_compile_attributes():
    from vllm_otel_startup.agent.patching.compile_stages import _attrs

    meta = {"compile_id": "0/0", "graphs": 3, "cached": True, "obj": object(), "reason": "None"}
    assert _attrs(meta) == {"torch.compile.compile_id": "0/0", "torch.compile.graphs": 3,
                            "torch.compile.cached": True}
    assert _attrs(None) == {} and _attrs(["not", "a", "dict"]) == {}
