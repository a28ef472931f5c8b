"""``vllm-otel-startup compare A B`` as a table and as a picture (paired bars, HTML or PNG); the comparison itself
(phase by phase: durations, deltas, the causes that changed) is model/comparison.py's, re-exported here for the
command's callers."""

from __future__ import annotations

import argparse
from html import escape

from vllm_otel_startup.canvas import Line, Rect, Scene, Text, fit
from vllm_otel_startup.cli import html_page, sources
from vllm_otel_startup.cli.output import to_stderr, warn
from vllm_otel_startup.model.comparison import CAUSES, Comparison, Row, compare, headlines, shown_rows
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import KIND_LABEL, seconds
from vllm_otel_startup.model.formatting import signed_seconds as _signed

__all__ = ["CAUSES", "Comparison", "Row", "compare", "headlines", "html", "seconds", "shown_rows", "table",
           "write_html", "write_png", "scene", "run"]


def _num(v: float | None) -> str:
    return "-" if v is None else seconds(v)


def table(cmp: Comparison) -> str:
    lines = [f"A: {cmp.a_label}", f"B: {cmp.b_label}", f"model: {cmp.model}"]
    heads = headlines(cmp)
    if heads:
        lines.append("changed causes:")
        lines += [f"  {h}" for h in heads]
    side = "median" if cmp.a_n > 1 or cmp.b_n > 1 else ""
    lines.append("")
    lines.append(f"{'phase':<52} {'process':<11} {('A ' + side).strip():>9} {('B ' + side).strip():>9} "
                 f"{'delta':>9} {'delta %':>8}")
    for r in shown_rows(cmp):
        pct = r.pct()
        name = ("  " * r.depth + r.name)[:52]
        text = (f"{name:<52} {KIND_LABEL.get(r.key[0], r.key[0]):<11} {_num(r.a):>9} {_num(r.b):>9} "
                f"{_signed(r.delta):>9} {pct:>8}")
        changes = r.changes()
        if changes:
            text += "  " + "; ".join(changes)
        lines.append(text)
    return "\n".join(lines)


# --- picture -------------------------------------------------------------------------------------------
A_FILL, B_FILL = "#90a4ae", "#42a5f5"
FASTER, SLOWER = "#2e7d32", "#c62828"


def scene(cmp: Comparison, max_rows: int = 28) -> Scene:
    rows = shown_rows(cmp, 0.01)
    rows = sorted(rows, key=lambda r: -max(r.a or 0, r.b or 0))[:max_rows]
    rows.sort(key=lambda r: (r.key[1] != "startup", r.order, r.depth))
    width, left, right_text = 1400, 330, 420
    plot = width - left - right_text - 20
    vmax = max([0.001] + [max(r.a or 0, r.b or 0) for r in rows])
    sc_ = Scene(width, 0)
    sc_.add(Text(16, 20, "vLLM startup: compare", 18, bold=True))
    sc_.add(Text(16, 42, fit(f"model {cmp.model}", 12, width - 32), 12, "#555"))
    sc_.add(Rect(16, 58, 14, 10, A_FILL))
    sc_.add(Text(36, 63, fit(f"A: {cmp.a_label}", 12, width / 2 - 60), 12, "#333"))
    sc_.add(Rect(width / 2, 58, 14, 10, B_FILL))
    sc_.add(Text(width / 2 + 20, 63, fit(f"B: {cmp.b_label}", 12, width / 2 - 40), 12, "#333"))
    y = 84
    heads = headlines(cmp)
    for h in heads[:4]:
        sc_.add(Text(16, y, fit(h, 13, width - 32), 13, FASTER if " -" in h.split(",")[-1] else SLOWER, bold=True))
        y += 20
    y += 6
    for n, r in enumerate(rows):
        h = 30
        if r.changes():
            sc_.add(Rect(0, y, width, h, "#fff8e1"), 0)
        elif n % 2 == 0:
            sc_.add(Rect(0, y, width, h, "#f7f9fa"), 0)
        indent = 12 * min(r.depth, 8)
        sc_.add(Text(16 + indent, y + h / 2 - 6, fit(r.name, 12, left - 30 - indent), 12, bold=r.key[1] == "startup"))
        sc_.add(Text(16 + indent, y + h / 2 + 8, KIND_LABEL.get(r.key[0], r.key[0]), 10, "#777"))
        for k, (v, fill) in enumerate(((r.a, A_FILL), (r.b, B_FILL))):
            if v:
                bw = max(plot * v / vmax, 1)
                tip = f"{r.name} [{r.key[0]}] {'AB'[k]}: {seconds(v)}"
                sc_.add(Rect(left, y + 4 + k * 11, bw, 10, fill, title=tip))
        tx = left + plot + 16
        delta = r.delta
        color = FASTER if delta < 0 else SLOWER if delta > 0 else "#555"
        pct = f" ({r.pct()})" if r.pct() else ""
        a_text, b_text = _num(r.a) if r.a is not None else "absent", _num(r.b) if r.b is not None else "absent"
        sc_.add(Text(tx, y + h / 2 - 6, f"{a_text} → {b_text} · {_signed(delta)}{pct}", 12, color))
        changes = r.changes()
        if changes:
            sc_.add(Text(tx, y + h / 2 + 8, fit("; ".join(changes), 11, right_text - 10), 11, "#333", bold=True))
        y += h
    sc_.add(Line(left, 84 + 20 * min(len(heads), 4), left, y, "#bbb"))
    sc_.height = y + 16
    return sc_


STYLE = ("body{font-family:DejaVu Sans,Verdana,Arial,sans-serif;margin:16px}"
         "pre{font-size:12px;background:#f7f7f7;padding:8px;overflow-x:auto}"
         ".chart{border:1px solid #e0e0e0;min-width:900px}.chart svg{display:block;width:100%;height:auto}")


def html(cmp: Comparison) -> str:
    body = f"<div class=\"chart\">{scene(cmp).svg()}</div>\n<h2>Table</h2><pre>{escape(table(cmp))}</pre>\n"
    return html_page.page("vLLM startup: compare", STYLE, body)


def write_html(cmp: Comparison, path: str) -> None:
    html_page.write_text(path, html(cmp))


def write_png(cmp: Comparison, path: str) -> None:
    scene(cmp).png(path)


def run(args: argparse.Namespace, tempo: str | None) -> int:
    """The command: the comparison as a table (or --json), and the picture where --html / --png ask for it."""
    if args.a == args.b == "-":
        raise ReportError("only one side can be read from standard input (-)")
    if getattr(args, "phase", None) and getattr(args, "fail_if_slower", None) is None:
        raise ReportError("--phase gates one phase: it needs --fail-if-slower PCT")
    jaeger = getattr(args, "jaeger", None)
    a = sources.side(args.a, tempo, jaeger)
    b = sources.side(args.b, tempo, jaeger)
    c = compare(a, b, a_label=sources.side_label(args.a, a), b_label=sources.side_label(args.b, b),
                        allow_different_models=args.allow_different_models)
    if args.json:
        from vllm_otel_startup.cli import json_out

        print(json_out.dumps(json_out.compare(c, headlines(c), shown_rows(c))))
    else:
        print(table(c))
    say = to_stderr if args.json else print  # stdout holds only the document
    if args.html:
        write_html(c, args.html)
        say(f"picture: {args.html}")
    if args.png:
        write_png(c, args.png)
        say(f"picture: {args.png}")
    if getattr(args, "trace_event", None):
        from vllm_otel_startup.cli import trace_event

        newest = [max(side, key=lambda st: st.root.start) for side in (a, b)]
        trace_event.write(args.trace_event, [("A: ", newest[0]), ("B: ", newest[1])])
        say(f"trace events: {args.trace_event} (A and B side by side)")
    if getattr(args, "fail_if_slower", None) is not None:
        from vllm_otel_startup.cli import gate

        status, line = gate.check(c, args.fail_if_slower, args.phase)
        warn(line)
        return status
    return 0
