"""Every phase id sits in exactly one group of each phase grouping (phase_groups): a new phase must be placed in
the waterfall's colours, the predictor's groups and the dashboards' stack, or listed as "other" by name."""

from __future__ import annotations

import pytest

from vllm_otel_startup import phase_groups as pg
from vllm_otel_startup import semconv as sc


@pytest.mark.parametrize("name", sorted(pg.PHASE_GROUPINGS))
def test_every_phase_belongs_to_exactly_one_group(name):
    groups = pg.PHASE_GROUPINGS[name]
    placed = [p for phases in groups.values() for p in phases]
    assert sorted(placed) == sorted(set(placed)), f"{name}: a phase sits in two groups"
    assert set(placed) == set(sc.PHASES), f"{name}: place {sorted(set(sc.PHASES) - set(placed))}"
    assert pg.OTHER_GROUP in groups


def test_the_predictor_has_features_for_each_of_its_groups():
    from vllm_otel_startup.model import predict

    assert list(predict.FEATURES) == list(pg.PREDICT_GROUPS)
