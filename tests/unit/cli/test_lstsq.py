"""The predictor's least squares: numpy's solver where numpy imports, the standard library's otherwise, and the two
give the same coefficients (and so the same predictions) on the committed corpus of real starts."""

from __future__ import annotations

import sys

import pytest
from recorded import DATA

from vllm_otel_startup.cli import lstsq, sources
from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.model import predict

np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def corpus() -> list[predict.Sample]:
    return [predict.sample(s) for s in sources.many([str(DATA / "corpus")], ready_only=True)]


def test_numpy_and_the_standard_library_give_the_same_predictions(corpus):
    """Every prediction within 1e-9 s (measured: 1.4e-14 s). The coefficients agree to 1e-8 relative, not 1e-9:
    on this CPU corpus ``processes`` is 3 in every start, as collinear with ``one`` as it gets, so the bootstrap
    group's normal equations have a condition number of ~1e7 (only the ridge separates the two) and LU and
    Gauss-Jordan part in the 9th digit (measured: 3.2e-9) along a direction no start of the corpus can see."""
    assert lstsq.solver() is lstsq.numpy_least_squares
    fits = [corpus] + [[t for t in corpus if t.model != m] for m in sorted({s.model for s in corpus})]
    for train in fits:  # the full fit and every leave-one-model-out fit
        ours, theirs = predict.fit(train, predict.least_squares), predict.fit(train, lstsq.numpy_least_squares)
        for g in ours.coef:
            assert theirs.coef[g] == pytest.approx(ours.coef[g], rel=1e-8, abs=1e-9), g
        for s in corpus:
            assert theirs.expect(s.x) == pytest.approx(ours.expect(s.x), abs=1e-9, rel=0), s.source
    exact = [[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]]  # y = 0.5 + 2x: both recover it (the ridge moves it by ~1e-6)
    for solve in (predict.least_squares, lstsq.numpy_least_squares):
        assert solve(exact, [4.5, 6.5, 10.5]) == pytest.approx([0.5, 2.0], abs=1e-4)
    assert lstsq.numpy_least_squares([[0.0, 1.0]] * 3, [1.0] * 3, ridge=0.0) == predict.least_squares(
        [[0.0, 1.0]] * 3, [1.0] * 3, ridge=0.0)  # a singular system: both zero the feature that never varies


def test_predict_runs_without_numpy_and_prints_the_same(monkeypatch, capsys):
    argv = ["predict", str(DATA / "corpus" / "l4-h256-eager-cold.jsonl.gz"), "--corpus", str(DATA / "corpus")]
    assert cli.main(argv) == 0
    with_numpy = capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError, as where it is absent
    assert lstsq.solver() is predict.least_squares
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == with_numpy and "expected" in with_numpy
