"""model/comparison.py: two sets of starts of one model, phase by phase in tree order (medians per side), with the
causes that changed and the time they moved as headlines, biggest first; starts of different models are refused
unless asked for. On real recorded starts (tests/data/starts/dev: the same tiny model cold, then warm)."""

from __future__ import annotations

import pytest
from recorded import dev

from vllm_otel_startup.model import comparison
from vllm_otel_startup.model.comparison import Row
from vllm_otel_startup.model.errors import ReportError


def test_cold_against_warm_names_the_cache_that_hit_and_the_time_it_moved():
    a, b = dev("eager-cold"), dev("eager-warm")
    cmp = comparison.compare([a], [b], a_label="cold", b_label="warm")
    assert (cmp.a_label, cmp.b_label, cmp.a_n, cmp.b_n, cmp.model) == ("cold", "warm", 1, 1, a.model)
    assert cmp.rows[0].key == ("api_server", "startup") and cmp.rows[0].depth == 0
    assert cmp.rows[0].a == pytest.approx(a.root.duration) and cmp.rows[0].b == pytest.approx(b.root.duration)
    heads = comparison.headlines(cmp)
    assert heads[0].startswith("Model architecture inspection [API server]: modelinfo cache miss → hit, -")
    assert heads[-1] == f"start: cache root cold → warm, -{a.root.duration - b.root.duration:.1f} s in total"


def test_rows_follow_the_tree_and_small_unchanged_rows_are_not_shown():
    cmp = comparison.compare([dev("eager-cold")], [dev("eager-warm")])
    orders = [r.order for r in cmp.rows]
    assert orders == sorted(orders)
    shown = comparison.shown_rows(cmp)
    assert shown and set(map(id, shown)) < set(map(id, cmp.rows))
    total = cmp.rows[0].a
    for r in cmp.rows:
        if r not in shown:
            assert max(r.a or 0, r.b or 0) < max(0.05, 0.005 * total) and not r.changes()


def test_starts_of_different_models_are_refused_unless_asked_for():
    a, other = dev("eager-cold"), dev("bad-model")
    with pytest.raises(ReportError, match="A and B are starts of different models"):
        comparison.compare([a], [other])
    with pytest.raises(ReportError, match="A holds starts of 2 models"):
        comparison.compare([a, other], [a])
    cmp = comparison.compare([a], [other], allow_different_models=True)
    assert cmp.model == ", ".join(sorted({a.model, other.model}))


def test_a_row_states_its_change_delta_and_share():
    r = Row(("worker", "weights_load"), "Load weights", 2, 1.0, 2.0, 1.5,
            {"weights": "local_dir"}, {"weights": "hub", "modelinfo cache": "hit"})
    assert r.delta == -0.5 and r.pct() == "-25%"
    assert r.changes() == ["weights local_dir → hub", "modelinfo cache absent → hit"]
    assert Row(("w", "p"), "p", 0, 0, 0.01, 1.0).pct() == ""  # too short a base for a share
