"""tests/unit/spans.py, the whole-attribute comparison the unit tests state spans with: an attribute nobody named
fails it, as a missing or different one does; ``allow`` admits readings a test does not control; ANY admits a
value whose presence alone is the contract."""

from __future__ import annotations

import types

import pytest
from spans import ANY, RESOURCE, assert_attributes

from vllm_otel_startup import semconv as sc


def _span(**attrs) -> types.SimpleNamespace:
    return types.SimpleNamespace(name="Load weights", attributes=attrs)


def test_the_whole_dict_passes_and_tuples_equal_lists():
    assert_attributes(_span(**{sc.PHASE: "weights_load", sc.COMMAND_ARGS: ("a", "b")}),
                      {sc.PHASE: "weights_load", sc.COMMAND_ARGS: ["a", "b"]})


@pytest.mark.parametrize(("attrs", "words"), [
    ({sc.PHASE: "weights_load", "leaked.secret": "x"}, "unexpected [('leaked.secret', 'x')]"),
    ({}, f"missing ['{sc.PHASE}']"),
    ({sc.PHASE: "config"}, "different (got, expected) {"),
])
def test_an_extra_a_missing_or_a_different_attribute_fails(attrs, words):
    with pytest.raises(AssertionError) as failed:
        assert_attributes(_span(**attrs), {sc.PHASE: "weights_load"})
    assert words in str(failed.value) and str(failed.value).startswith("Load weights: ")


def test_the_samplers_readings_are_allowed_by_default_and_not_when_allow_is_empty():
    span = _span(**{sc.PHASE: "gc", sc.RES_CPU_TIME: 0.5, sc.GC_COLLECTED: 7})
    assert sc.RES_CPU_TIME in RESOURCE
    assert_attributes(span, {sc.PHASE: "gc", sc.GC_COLLECTED: ANY})
    with pytest.raises(AssertionError, match="unexpected"):
        assert_attributes(span, {sc.PHASE: "gc", sc.GC_COLLECTED: ANY}, allow=())
