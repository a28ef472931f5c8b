"""``vllm-otel-startup report``: one recorded start's phase tree with durations, share, process and causes,
the explained share, observations and advice; optionally the waterfall picture (HTML and/or PNG)."""

from __future__ import annotations

import sys
from typing import TextIO

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import sources, waterfall
from vllm_otel_startup.cli.phase_tree import coverage, render
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

__all__ = ["Span", "coverage", "load", "render", "rule_errors", "run"]


def load(path: str) -> list[Span]:
    """Every span in a recorded-start file (the e2e tests read their files with it)."""
    return sources.read_file(path)


def rule_errors(st: Start, err: TextIO | None = None) -> bool:
    """Each advice rule that raised on this start as an error line (stderr); True when any did. Inside the server
    the printout goes on without such a rule; here there is no host to protect: a broken rule is a bug to see."""
    for f in st.advice_failures:
        print(f"vllm-otel-startup: error: advice rule {f.rule} failed on this start ({f.error}); its advice is "
              "missing", file=err or sys.stderr)
    return bool(st.advice_failures)


def run(source: str | None, *, html: str | None = None, png: str | None = None, tempo_url: str | None = None,
        trace_id: str | None = None, out: TextIO | None = None, detail: bool = False, as_json: bool = False,
        jaeger_url: str | None = None, trace_event: str | None = None) -> int:
    """Exit status 0; 1 where the start did not reach ready or an advice rule failed on it. ``as_json``: one JSON
    document on ``out`` (json_out.report), the picture notes on stderr. ``trace_event``: the start as a Trace
    Event Format file (cli/trace_event.py)."""
    out = out or sys.stdout
    st = sources.one(source, tempo_url=tempo_url, trace_id=trace_id, jaeger_url=jaeger_url)
    if as_json:
        from vllm_otel_startup.cli import json_out

        print(json_out.dumps(json_out.report(st)), file=out)
    else:
        print(f"start {st.trace_id}  outcome={st.root.attrs.get(sc.OUTCOME, '?')}  file={st.source}", file=out)
        print(render(st, detail=detail), file=out)
    notes = sys.stderr if as_json else out
    if html:
        waterfall.write_html(st, html)
        print(f"waterfall: {html}", file=notes)
    if png:
        waterfall.write_png(st, png)
        print(f"waterfall: {png}", file=notes)
    if trace_event:
        from vllm_otel_startup.cli import trace_event as te

        te.write(trace_event, [("", st)])
        print(f"trace events: {trace_event} (open in https://ui.perfetto.dev or chrome://tracing)", file=notes)
    failed_rules = rule_errors(st)
    return 0 if st.ready and not failed_rules else 1
