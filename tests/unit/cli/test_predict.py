"""cli/predict.py, the predict command's text: one start's expected vs actual per phase group, its largest residual
named with a verdict, and a start unlike the corpus said to be so (the fit itself:
tests/unit/model/test_predict.py)."""

from __future__ import annotations

import pytest
from recorded import DATA, dev, named

from vllm_otel_startup.cli import predict as rendering
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model import predict


@pytest.fixture(scope="module")
def corpus() -> list[predict.Sample]:
    return [predict.sample(s) for s in sources.many([str(DATA / "corpus")], ready_only=True)]



def test_a_planted_slow_phase_is_the_largest_residual(corpus):
    model, _ = predict.fit_validated(corpus)
    st = dev("eager-warm")
    w = named(st, "Load weights")
    w.end += int(20e9)
    for s in st.spans:  # the parents grow with it
        if s.end >= w.start and s.start <= w.start and s is not w:
            s.end += int(20e9)
    text = rendering.explain(model, predict.sample(st))
    assert "largest residual: weights +20.0 s" in text and "look there" in text
    normal = rendering.explain(model, predict.sample(dev("eager-warm")))
    assert "nothing unusual" in normal


def test_a_start_unlike_the_corpus_says_so(corpus):
    model = predict.fit([s for s in corpus if not s.x["compiled"]])
    text = rendering.explain(model, predict.sample(dev("compiled-warm")))
    assert "largest residual: compile" in text and "outside the corpus" in text
