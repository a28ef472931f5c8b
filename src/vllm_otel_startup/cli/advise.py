"""``vllm-otel-startup advise``: one recorded start's advice (each with its evidence and what to change) and
notes; exit status 1 where an advice rule failed on the start."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace, tempo: str | None) -> int:
    """Exit status 1 where an advice rule failed on the start (one error line each)."""
    from vllm_otel_startup.cli import sources
    from vllm_otel_startup.cli.report import rule_errors

    st = sources.one(args.source, tempo_url=tempo, jaeger_url=getattr(args, "jaeger", None))
    if args.json:
        from vllm_otel_startup.cli import json_out

        print(json_out.dumps(json_out.advise(st)))
        return 1 if rule_errors(st) else 0
    f = st.facts
    print(f"start {st.trace_id} ({f.model}, {f.outcome}, {f.total:.1f} s): {len(st.advice)} advice")
    for a in st.advice:
        first, *rest = a.lines()
        print(f"* {first}")
        for r in rest:
            print(f"  {r}")
    for note in st.observations:
        print(f"note: {note}")
    return 1 if rule_errors(st) else 0
