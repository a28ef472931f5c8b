"""Every phase id sits in exactly one group of each phase grouping (semconv): a new phase must be placed in
the waterfall's colours, the predictor's groups and the dashboards' stack, or listed as "other" by name."""

from __future__ import annotations

import pytest

from vllm_otel_startup import semconv as sc


@pytest.mark.parametrize("name", sorted(sc.PHASE_GROUPINGS))
def test_every_phase_belongs_to_exactly_one_group(name):
    groups = sc.PHASE_GROUPINGS[name]
    placed = [p for phases in groups.values() for p in phases]
    assert sorted(placed) == sorted(set(placed)), f"{name}: a phase sits in two groups"
    assert set(placed) == set(sc.PHASES), f"{name}: place {sorted(set(sc.PHASES) - set(placed))}"
    assert sc.OTHER_GROUP in groups


def test_the_predictor_has_features_for_each_of_its_groups():
    from vllm_otel_startup.cli import predict

    assert list(predict.FEATURES) == list(sc.PREDICT_GROUPS)
