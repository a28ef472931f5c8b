"""predict: per-group linear fits on the committed corpus of real starts (8 model sizes, eager and compiled,
cold and warm: tools/record_corpus.py), honest leave-one-model-out error, expected vs actual for a new
start, and the group with the largest residual flagged."""

from __future__ import annotations

import copy

import pytest
from recorded import DATA, dev, named

from vllm_otel_startup.cli import predict as rendering
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model import predict
from vllm_otel_startup.model.errors import ReportError


@pytest.fixture(scope="module")
def corpus() -> list[predict.Sample]:
    return [predict.sample(s) for s in sources.many([str(DATA / "corpus")], ready_only=True)]


def test_groups_partition_the_start(corpus):
    for s in corpus:
        parts = sum(v for k, v in s.y.items() if k != "total")
        assert parts == pytest.approx(s.y["total"], abs=1e-6)
    cold = dev("compiled-cold")
    y = predict.group_seconds(cold.root, cold.spans)
    assert y["compile"] == pytest.approx(named(cold, "Warmup (CPU)").duration)
    assert y["model_inspection"] == pytest.approx(named(cold, "Model architecture inspection").duration)


def test_leave_one_model_out_error_is_measured_and_beats_the_naive_baseline(corpus):
    v = predict.validate(corpus)
    assert len(v.rows) == 22 and len({s.model for s, _ in v.rows}) == 8
    for s, pred in v.rows:  # every prediction is the one a fit that never saw the start's model makes ...
        without = predict.fit([t for t in corpus if t.model != s.model])
        assert pred["total"] == pytest.approx(without.expect(s.x)["total"], abs=1e-9), s.source
    # ... and that is a different prediction from a fit that saw it (holding the model out is not a no-op)
    seen = predict.fit(corpus)
    assert sum(abs(seen.expect(s.x)["total"] - pred["total"]) > 0.01 for s, pred in v.rows) >= len(v.rows) // 2
    total = v.stats(v.errors("total"), [s.y["total"] for s, _ in v.rows])
    base = v.stats([p - s.y["total"] for (s, _), p in zip(v.rows, v.baseline, strict=True)],
                   [s.y["total"] for s, _ in v.rows])
    # the numbers docs/report.md states (2.28 s, 5.7 %; baseline 3.52 s, 8.2 %) within rounding
    assert total["mae"] == pytest.approx(2.28, abs=0.01) and total["mape"] == pytest.approx(5.7, abs=0.1)
    assert base["mae"] == pytest.approx(3.52, abs=0.01)
    assert total["mae"] < base["mae"]
    table = rendering.validation_table(v)
    assert "22 starts of 8 models" in table and "total: mean absolute error 2.28 s (5.7 %)" in table


HELD_OUT = ("eager-cold", "eager-warm", "compiled-cold", "compiled-warm")


def test_a_start_of_a_config_the_fit_never_saw_is_predicted_within_its_stated_error(corpus):
    """Held out: the four dev starts (2 layers x 128, recorded in another session than the corpus). The fit sees
    no start of that config: the corpus's own `l2-h128` starts are dropped (same weights to the byte, so the
    same config), and no training start has the held-out weights size or model path.

    The bound is the predictor's own claim, derived from the training starts only: `predict` prints each start
    with a "typical error" (the fit's leave-one-model-out RMSE of the total on its training starts) and calls a
    residual within twice that "nothing unusual" (about a 95 % interval for a roughly normal error). A start of
    a config it never saw, taken on another day, must land inside it, or the stated error is not a prediction
    error. (Twice the RMSE here, 10.6 s, is above this machine's noise floor: one configuration started twice
    differs by up to 6.6 s, docs/results.md, so a tighter bound would assert noise.) The predictor must also
    beat the naive baseline (the mean training start of the same class) on these starts."""
    held = [predict.sample(dev(name)) for name in HELD_OUT]
    config = {s.x["weights_gb"] for s in held}
    train = [s for s in corpus if s.x["weights_gb"] not in config]
    assert len(config) == 1 and len(train) == len(corpus) - 4  # exactly the corpus's four l2-h128 starts left
    assert not {s.model for s in held} & {s.model for s in train}
    model, v = predict.fit_validated(train)
    assert v is not None and {s.model for s, _ in v.rows} == {s.model for s in train}
    bound = 2 * model.rmse["total"]
    errors, naive = [], []
    for s in held:
        err = model.expect(s.x)["total"] - s.y["total"]
        errors.append(err)
        same = [t.y["total"] for t in train if (t.x["compiled"], t.x["modelinfo_miss"]) ==
                (s.x["compiled"], s.x["modelinfo_miss"])]
        naive.append(sum(same) / len(same) - s.y["total"])
        assert abs(err) <= bound, (s.source, err, bound)
        assert "nothing unusual" in rendering.explain(model, s), s.source
    print(f"held-out errors {[round(e, 2) for e in errors]} s, bound ±{bound:.2f} s; naive {naive}")
    assert sum(map(abs, errors)) < sum(map(abs, naive))


def test_save_and_load_round_trip(corpus, tmp_path):
    model, _ = predict.fit_validated(corpus)
    again = predict.Model.from_json(model.to_json())
    x = predict.sample(dev("compiled-cold")).x
    assert again.expect(x) == pytest.approx(model.expect(x))
    assert again.rmse == pytest.approx(model.rmse)
    with pytest.raises(ReportError, match="not a saved predictor"):
        predict.Model.from_json("{}")


def test_too_few_starts_or_models(corpus):
    with pytest.raises(ReportError, match="at least 3 recorded starts"):
        predict.fit(corpus[:2])
    with pytest.raises(ReportError, match="at least 3 models"):
        predict.validate([s for s in corpus if s.model.endswith(("l1-h128", "l2-h128"))])


def test_features_come_from_the_trace():
    x = predict.sample(dev("compiled-cold")).x
    assert x["compile_miss"] == 1 and x["compile_hit"] == 0 and x["modelinfo_miss"] == 1
    assert x["weights_gb"] == pytest.approx(1577616 / 1e9)
    x = predict.sample(copy.deepcopy(dev("compiled-warm"))).x
    assert x["compile_hit"] == 1 and x["modelinfo_miss"] == 0
