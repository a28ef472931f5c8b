"""cli/advise.py, the advise command: a recorded start's advice, each with its evidence and what to change, and
its notes; one JSON document with --json; exit status 1 where an advice rule failed on the start."""

from __future__ import annotations

import argparse
import json

from recorded import dev, dev_path

from vllm_otel_startup.cli import advise
from vllm_otel_startup.model import advice


def _args(name: str, as_json: bool = False) -> argparse.Namespace:
    return argparse.Namespace(source=dev_path(name), json=as_json)


def test_the_advice_with_its_lines_and_the_notes(capsys):
    st = dev("eager-cold")
    assert advise.run(_args("eager-cold"), None) == 0
    lines = capsys.readouterr().out.splitlines()
    f = st.facts
    assert lines[0] == f"start {st.trace_id} ({f.model}, {f.outcome}, {f.total:.1f} s): {len(st.advice)} advice"
    first, *rest = st.advice[0].lines()
    assert lines[1] == f"* {first}" and lines[2:2 + len(rest)] == [f"  {r}" for r in rest]
    assert [ln for ln in lines if ln.startswith("note: ")] == [f"note: {n}" for n in st.observations]


def test_json_is_one_document_of_the_same_advice(capsys):
    assert advise.run(_args("eager-cold", as_json=True), None) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["advice"]) == len(dev("eager-cold").advice) and doc["advice_failures"] == []


def test_a_rule_that_fails_on_the_start_exits_1(monkeypatch, capsys):
    def broken(f, spans):
        raise KeyError("planted")

    monkeypatch.setattr(advice, "RULES", [*advice.RULES, advice.Rule("broken_rule", "never", broken)])
    assert advise.run(_args("eager-warm"), None) == 1
    assert "error: advice rule broken_rule failed on this start" in capsys.readouterr().err
