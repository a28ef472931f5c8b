"""``vllm-otel-startup report``: one recorded start's phase tree with durations, share, process and causes,
the explained share, observations and advice; optionally the waterfall picture (HTML and/or PNG)."""

from __future__ import annotations

import sys
from typing import TextIO

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import sources, waterfall
from vllm_otel_startup.cli.phase_tree import coverage, render
from vllm_otel_startup.model.spanmodel import Span

__all__ = ["Span", "coverage", "load", "render", "run"]


def load(path: str) -> list[Span]:
    """Every span in a recorded-start file (the e2e tests read their files with it)."""
    return sources.read_file(path)


def run(source: str | None, *, html: str | None = None, png: str | None = None, tempo_url: str | None = None,
        trace_id: str | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    st = sources.one(source, tempo_url=tempo_url, trace_id=trace_id)
    print(f"start {st.trace_id}  outcome={st.root.attrs.get(sc.OUTCOME, '?')}  file={st.source}", file=out)
    print(render(st), file=out)
    if html:
        waterfall.write_html(st, html)
        print(f"waterfall: {html}", file=out)
    if png:
        waterfall.write_png(st, png)
        print(f"waterfall: {png}", file=out)
    return 0 if st.ready else 1
