"""model/start.py: one recorded start, its spans linked into a tree once, and what every reader asks of it
(facts, processes, critical path, advice) computed once; spans without a ``vLLM startup`` root are no start."""

from __future__ import annotations

import pytest
from recorded import dev

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.start import Start


def test_a_start_links_its_spans_under_its_root():
    st = dev("eager-cold")
    again = Start(st.spans, source="copy")
    assert again.root.name == sc.ROOT_SPAN and again.root.span_id == st.root.span_id
    assert again.trace_id == st.root.trace_id and again.source == "copy"
    by_id = {s.span_id: s for s in again.spans}
    assert all(c in by_id[p.span_id].children for p in again.spans for c in p.children)
    assert {c.name for c in again.root.children} >= {sc.INTERPRETER_START_SPAN, sc.IMPORTS_SPAN}


def test_ready_is_the_roots_outcome():
    assert dev("eager-cold").ready is True
    failed = dev("bad-model")
    assert failed.ready is False and failed.root.attrs[sc.OUTCOME] == "failed"


def test_what_readers_ask_is_computed_once():
    st = dev("compiled-cold")
    assert st.facts is st.facts and st.lanes is st.lanes and st.critical_path is st.critical_path
    assert st.advice is st.advice and st.advice_failures == []
    assert st.model == st.facts.model


def test_spans_without_a_vllm_startup_root_are_no_start():
    st = dev("eager-warm")
    without = [s for s in st.spans if s.name != sc.ROOT_SPAN and s.parent_id is not None]
    with pytest.raises(ReportError, match="not a vLLM start"):
        Start(without, source="orphans.jsonl")
