"""``--json``: what ``report``, ``advise``, ``compare`` and ``predict`` print, as one JSON document each.

Each document names its schema (``"schema": "vllm-otel-startup/<command>/v<N>"``); the JSON Schemas are
``docs/schemas/<command>.v<N>.json`` (tests/unit/cli/test_json_out.py validates every command's output against them).
A version only grows compatibly (new optional fields); a change that breaks a reader gets a new version.
Times are seconds (floats), offsets from the start's root span.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.facts import KIND_LABEL, cause_labels, kind_of, phase_of
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

VERSION = 1


def schema_id(command: str) -> str:
    return f"vllm-otel-startup/{command}/v{VERSION}"


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=False, default=str)


def _facts(st: Start) -> dict[str, Any]:
    return {k: v for k, v in asdict(st.facts).items() if k != "seconds"}


def _span(s: Span, depth: int, t0: int, total: float) -> dict[str, Any]:
    return {"name": s.name, "phase": phase_of(s), "process": kind_of(s), "pid": s.attrs.get("process.pid"),
            "span_id": s.span_id, "parent_id": s.parent_id, "depth": depth, "start_s": (s.start - t0) / 1e9,
            "duration_s": s.duration, "share": s.duration / total if total > 0 else 0.0,
            "waiting": bool(s.attrs.get(sc.WAITING)), "error": s.status == 2, "causes": cause_labels(s),
            "attributes": dict(s.attrs)}


def _tree(st: Start) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    t0, total = st.root.start, max(st.root.duration, 0.0)

    def walk(s: Span, depth: int) -> None:
        out.append(_span(s, depth, t0, total))
        for c in s.children:
            walk(c, depth + 1)

    walk(st.root, 0)
    return out


def _advice(st: Start) -> list[dict[str, Any]]:
    return [{"rule": a.rule, "phase": a.phase, "evidence": a.evidence, "change": a.change, "saving_s": a.saving_s,
             "basis": a.basis} for a in st.advice]


def _critical_path(st: Start) -> dict[str, Any]:
    cp = st.critical_path
    return {"share": cp.share, "total_s": cp.total_s, "unexplained_s": cp.unexplained_s, "headline": cp.headline(5),
            "gaps": [asdict(g) for g in cp.gaps],
            "stragglers": [{**asdict(s), "text": s.text()} for s in cp.stragglers],
            "rank_waits": [{**asdict(w), "text": w.text()} for w in cp.rank_waits]}


def _identity(st: Start) -> dict[str, Any]:
    f = st.facts
    return {"trace_id": st.trace_id, "source": st.source, "outcome": f.outcome, "model": f.model,
            "total_s": f.total, "mode": f.mode}


def report(st: Start) -> dict[str, Any]:
    return {"schema": schema_id("report"), **_identity(st), "facts": _facts(st), "spans": _tree(st),
            "critical_path": _critical_path(st), "notes": list(st.observations), "advice": _advice(st),
            "advice_failures": [asdict(x) for x in st.advice_failures]}


def advise(st: Start) -> dict[str, Any]:
    return {"schema": schema_id("advise"), **_identity(st), "advice": _advice(st), "notes": list(st.observations),
            "advice_failures": [asdict(x) for x in st.advice_failures]}


def compare(cmp: Any, headlines: list[str], shown: list[Any]) -> dict[str, Any]:
    shown_keys = {r.key for r in shown}
    return {"schema": schema_id("compare"), "a": {"label": cmp.a_label, "starts": cmp.a_n},
            "b": {"label": cmp.b_label, "starts": cmp.b_n}, "model": cmp.model,
            "aggregate": "median" if cmp.a_n > 1 or cmp.b_n > 1 else "single",
            "changed_causes": headlines, "start_changes": list(cmp.start_changes),
            "rows": [{"process": r.key[0], "process_label": KIND_LABEL.get(r.key[0], r.key[0]), "phase": r.key[1],
                      "name": r.name, "depth": r.depth, "a_s": r.a, "b_s": r.b, "delta_s": r.delta,
                      "changes": r.changes(), "shown": r.key in shown_keys} for r in cmp.rows]}


def predict(st: Start, rows: list[dict[str, Any]], largest: dict[str, Any] | None, notes: list[str],
            fitted_on: int) -> dict[str, Any]:
    return {"schema": schema_id("predict"), **_identity(st), "fitted_on": fitted_on, "groups": rows,
            "largest_residual": largest, "notes": notes}
