"""Command line ``vllm-otel-startup``: report, compare, advise and predict recorded vLLM starts.

SOURCE is a recorded-start file (our OTLP JSON lines, an OTLP JSON export or a saved Tempo response, .gz
too), "-" for standard input, a directory (its newest start; for sets every *.jsonl below it), a glob, a trace
id (the local file, or Tempo with --tempo), or a Tempo URL. Default: the newest start in
~/.cache/vllm-otel-startup/starts. --json prints one JSON document (docs/schemas/).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from vllm_otel_startup import settings
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.redact import redact_url, scrub

if TYPE_CHECKING:
    from vllm_otel_startup.model.start import Start


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm-otel-startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from vllm_otel_startup.version import __version__

    p.add_argument("--version", action="version", version=f"vllm-otel-startup {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    tempo_help = "Tempo base URL (e.g. http://tempo:3200) to fetch a trace id from " \
                 "(default: $OTEL_PYTHON_VLLM_STARTUP_TEMPO_URL)"
    json_help = "print one JSON document instead of text (schema docs/schemas/{cmd}.v1.json)"

    rep = sub.add_parser("report", help="phase tree, causes and advice of one start; waterfall picture")
    rep.add_argument("source", nargs="?", help="start to report (default: the newest recorded start)")
    rep.add_argument("--html", metavar="FILE", help="write the waterfall as self-contained HTML")
    rep.add_argument("--png", metavar="FILE", help="write the waterfall as PNG (needs Pillow)")
    rep.add_argument("--tempo", metavar="URL", help=tempo_help)
    rep.add_argument("--trace", metavar="ID", help="the start to pick when SOURCE holds several")
    rep.add_argument("--detail", action="store_true",
                     help="list every span (by default, 3 or more siblings of one name fold into one line)")
    rep.add_argument("--json", action="store_true", help=json_help.format(cmd="report"))

    cmp = sub.add_parser("compare", help="two starts or two sets of starts, phase by phase")
    cmp.add_argument("a", help="start(s) A: file, directory or glob (quote it)")
    cmp.add_argument("b", help="start(s) B")
    cmp.add_argument("--html", metavar="FILE", help="write the comparison picture as HTML")
    cmp.add_argument("--png", metavar="FILE", help="write the comparison picture as PNG (needs Pillow)")
    cmp.add_argument("--allow-different-models", action="store_true", help="compare starts of different models")
    cmp.add_argument("--tempo", metavar="URL", help=tempo_help)
    cmp.add_argument("--json", action="store_true", help=json_help.format(cmd="compare"))

    adv = sub.add_parser("advise", help="advice from the field's playbook, fired by evidence in the trace")
    adv.add_argument("source", nargs="?", help="start to advise on (default: the newest recorded start)")
    adv.add_argument("--tempo", metavar="URL", help=tempo_help)
    adv.add_argument("--json", action="store_true", help=json_help.format(cmd="advise"))

    pre = sub.add_parser("predict", help="per-phase linear models over recorded starts: expected vs actual")
    pre.add_argument("source", nargs="?", help="start to explain (default: the newest recorded start)")
    pre.add_argument("--corpus", metavar="SRC", action="append",
                     help="recorded starts to fit on: directory, glob or file; repeatable "
                          "(default: the local starts directory)")
    pre.add_argument("--model", metavar="FILE", help="use a saved fit instead of fitting")
    pre.add_argument("--save", metavar="FILE", help="save the fit (JSON)")
    pre.add_argument("--validate", action="store_true", help="print the leave-one-model-out error and exit")
    pre.add_argument("--tempo", metavar="URL", help=tempo_help)
    pre.add_argument("--json", action="store_true", help=json_help.format(cmd="predict") + " (not with --validate)")
    return p


def _warn(msg: str) -> None:
    print(f"vllm-otel-startup: {scrub(msg)}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    tempo = getattr(args, "tempo", None) or settings.text(settings.TEMPO_URL) or None
    commands = {"report": _report, "compare": _compare, "advise": _advise, "predict": _predict}
    if args.cmd not in commands:
        raise ReportError(f"unknown command {args.cmd}")
    return commands[args.cmd](args, tempo)


def _report(args: argparse.Namespace, tempo: str | None) -> int:
    from vllm_otel_startup.cli import report

    return report.run(args.source, html=args.html, png=args.png, tempo_url=tempo, trace_id=args.trace,
                      detail=args.detail, as_json=args.json)


def _compare(args: argparse.Namespace, tempo: str | None) -> int:
    from vllm_otel_startup.cli import compare

    if args.a == args.b == "-":
        raise ReportError("only one side can be read from standard input (-)")
    a = _side(args.a, tempo)
    b = _side(args.b, tempo)
    c = compare.compare(a, b, a_label=_label(args.a, a), b_label=_label(args.b, b),
                        allow_different_models=args.allow_different_models)
    if args.json:
        from vllm_otel_startup.cli import json_out

        print(json_out.dumps(json_out.compare(c, compare.headlines(c), compare.shown_rows(c))))
    else:
        print(compare.table(c))
    say = _to_stderr if args.json else print  # stdout holds only the document
    if args.html:
        compare.write_html(c, args.html)
        say(f"picture: {args.html}")
    if args.png:
        compare.write_png(c, args.png)
        say(f"picture: {args.png}")
    return 0


def _advise(args: argparse.Namespace, tempo: str | None) -> int:
    """Exit status 1 where an advice rule failed on the start (one error line each)."""
    from vllm_otel_startup.cli import sources
    from vllm_otel_startup.cli.report import rule_errors

    st = sources.one(args.source, tempo_url=tempo)
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


def _predict(args: argparse.Namespace, tempo: str | None) -> int:
    from vllm_otel_startup.cli import predict, sources

    corpus = args.corpus or [settings.start_dir()]
    if args.json and args.validate:
        raise ReportError("--json is for a start's prediction, not --validate (its table)")
    say = _to_stderr if args.json else print  # stdout holds only the document
    if args.model:
        try:
            with open(args.model, encoding="utf-8") as fh:
                model = predict.Model.from_json(fh.read(), args.model)
        except OSError as exc:
            raise ReportError(f"{args.model}: cannot read ({exc.strerror})") from None
        validation = None
    else:
        starts = sources.many(corpus, ready_only=True, warn=_warn)
        model, validation = predict.fit_validated([predict.sample(s) for s in starts])
        say(f"fitted on {model.n} starts from {' '.join(corpus)}")
    if args.save:
        try:
            with open(args.save, "w", encoding="utf-8") as fh:
                fh.write(model.to_json())
        except OSError as exc:
            raise ReportError(f"{args.save}: cannot write ({exc.strerror})") from None
        say(f"saved: {args.save}")
    if args.validate:
        if validation is None:
            raise ReportError("--validate needs a corpus (not --model) with starts of at least 3 models")
        print(predict.validation_table(validation))
        return 0
    st = sources.one(args.source, tempo_url=tempo)
    if not st.ready:
        raise ReportError(f"{st.source}: the start did not reach ready; nothing to predict")
    if args.json:
        from vllm_otel_startup.cli import json_out

        rows, largest, notes = predict.explanation(model, predict.sample(st))
        print(json_out.dumps(json_out.predict(st, rows, largest, notes, model.n)))
        return 0
    print(f"start {st.trace_id}: {st.source}")
    print(predict.explain(model, predict.sample(st)))
    return 0


def _to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def _side(src: str, tempo: str | None) -> list[Start]:
    from vllm_otel_startup.cli import sources

    if tempo and sources.TRACE_ID.match(src) and not os.path.exists(src):
        return [sources.one(src, tempo_url=tempo)]
    if os.path.isfile(src) or src.startswith(("http://", "https://")) or sources.TRACE_ID.match(src):
        return sources.many([src])
    return sources.many([src], ready_only=True, warn=_warn)


def _label(src: str, starts: list[Start]) -> str:
    src = redact_url(src)  # a Tempo URL's credentials stay out of the table and the picture
    return src if len(starts) == 1 else f"{src} ({len(starts)} starts)"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except ReportError as exc:
        _warn(str(exc))
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a command line prints one line, never a traceback
        if settings.flag(settings.DEBUG):
            raise
        _warn(f"internal error: {exc.__class__.__name__}: {exc} (OTEL_PYTHON_VLLM_STARTUP_DEBUG=1 shows the traceback)")
        return 2


if __name__ == "__main__":
    sys.exit(main())
