"""model/formatting.py: how durations and sizes read everywhere (summary, report, pictures, compare, predict)."""

from __future__ import annotations

import pytest

from vllm_otel_startup.model.formatting import human_bytes, seconds, signed_seconds


@pytest.mark.parametrize(("v", "text"), [(0.0, "0.000 s"), (0.0123, "0.012 s"), (0.1, "0.10 s"), (1.234, "1.23 s"),
                                         (12.34, "12.3 s"), (99.96, "100.0 s"), (123.4, "123 s")])
def test_a_duration_keeps_three_significant_digits_at_most(v, text):
    assert seconds(v) == text


def test_a_difference_has_a_direction_and_zero_has_none():
    assert signed_seconds(1.234) == "+1.23 s"
    assert signed_seconds(-1.234) == "-1.23 s"
    assert signed_seconds(0.0) == "±0.000 s"


@pytest.mark.parametrize(("n", "text"), [(None, "?"), (0, "0 B"), (999, "999 B"), (1_000, "1.0 kB"),
                                         (2_500_000, "2.5 MB"), (16e9, "16.0 GB")])
def test_sizes_use_decimal_units(n, text):
    assert human_bytes(n) == text
