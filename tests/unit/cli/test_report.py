"""cli/report.py, the report command: a recorded start's header and phase tree on stdout (or one JSON document),
picture notes, and exit status 1 where the start did not reach ready or an advice rule failed on it."""

from __future__ import annotations

import io
import json

from recorded import dev, dev_path

from vllm_otel_startup.cli import report
from vllm_otel_startup.model.advice import RuleFailure


def test_a_ready_start_prints_its_header_and_tree_and_exits_0():
    out = io.StringIO()
    assert report.run(dev_path("eager-cold"), out=out) == 0
    first, second, *_ = out.getvalue().splitlines()
    st = dev("eager-cold")
    assert first == f"start {st.trace_id}  outcome=ready  file={dev_path('eager-cold')}"
    assert "vLLM startup  [api_server]" in second


def test_a_failed_start_exits_1():
    out = io.StringIO()
    assert report.run(dev_path("bad-model"), out=out) == 1
    assert "outcome=failed" in out.getvalue().splitlines()[0]


def test_json_is_one_document_on_out_and_the_picture_note_goes_to_stderr(tmp_path, capsys):
    out, html = io.StringIO(), tmp_path / "w.html"
    assert report.run(dev_path("eager-warm"), out=out, as_json=True, html=str(html)) == 0
    doc = json.loads(out.getvalue())
    assert doc["trace_id"] == dev("eager-warm").trace_id
    assert html.read_text().startswith("<!doctype html>")
    assert capsys.readouterr().err == f"waterfall: {html}\n"


def test_each_failed_advice_rule_is_one_error_line():
    st = dev("eager-cold")
    err = io.StringIO()
    assert report.rule_errors(st, err) is False and err.getvalue() == ""
    st.advice_failures.append(RuleFailure("slow_weights", "KeyError: 'x'"))
    assert report.rule_errors(st, err) is True
    assert err.getvalue() == ("vllm-otel-startup: error: advice rule slow_weights failed on this start "
                              "(KeyError: 'x'); its advice is missing\n")
