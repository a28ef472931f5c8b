"""Command line ``vllm-otel-startup``: report, compare, advise and predict recorded vLLM starts.

SOURCE is a recorded-start file (our OTLP JSON lines, an OTLP JSON export or a saved Tempo or Jaeger response,
.gz too), "-" for standard input, a directory (its newest start; for sets every *.jsonl below it), a glob, a
trace id (the local file, Tempo with --tempo or Jaeger v2 with --jaeger), or a Tempo or Jaeger query URL.
Default: the newest start in ~/.cache/vllm-otel-startup/starts. --json prints one JSON document (docs/schemas/).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from vllm_otel_startup import settings
from vllm_otel_startup.cli import gate
from vllm_otel_startup.cli.output import warn
from vllm_otel_startup.model.errors import ReportError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm-otel-startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from vllm_otel_startup.version import __version__

    p.add_argument("--version", action="version", version=f"vllm-otel-startup {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    tempo_help = "Tempo base URL (e.g. http://tempo:3200) to fetch a trace id from " \
                 "(default: $OTEL_PYTHON_VLLM_STARTUP_TEMPO_URL)"
    jaeger_help = "Jaeger v2 query base URL (e.g. http://jaeger:16686) to fetch a trace id from " \
                  "(default: $OTEL_PYTHON_VLLM_STARTUP_JAEGER_URL)"
    trace_event_help = "write the start as a Trace Event Format JSON file (Perfetto UI, chrome://tracing)"
    json_help = "print one JSON document instead of text (schema docs/schemas/{cmd}.v1.json)"

    rep = sub.add_parser("report", help="phase tree, causes and advice of one start; waterfall picture")
    rep.add_argument("source", nargs="?", help="start to report (default: the newest recorded start)")
    rep.add_argument("--html", metavar="FILE", help="write the waterfall as self-contained HTML")
    rep.add_argument("--png", metavar="FILE", help="write the waterfall as PNG (needs Pillow)")
    rep.add_argument("--trace-event", metavar="FILE", help=trace_event_help)
    rep.add_argument("--tempo", metavar="URL", help=tempo_help)
    rep.add_argument("--jaeger", metavar="URL", help=jaeger_help)
    rep.add_argument("--trace", metavar="ID", help="the start to pick when SOURCE holds several")
    rep.add_argument("--detail", action="store_true",
                     help="list every span (by default, 3 or more siblings of one name fold into one line)")
    rep.add_argument("--json", action="store_true", help=json_help.format(cmd="report"))

    cmp = sub.add_parser("compare", help="two starts or two sets of starts, phase by phase")
    cmp.add_argument("a", help="start(s) A: file, directory or glob (quote it)")
    cmp.add_argument("b", help="start(s) B")
    cmp.add_argument("--html", metavar="FILE", help="write the comparison picture as HTML")
    cmp.add_argument("--png", metavar="FILE", help="write the comparison picture as PNG (needs Pillow)")
    cmp.add_argument("--trace-event", metavar="FILE",
                     help="write both starts side by side (each side's newest) as a Trace Event Format JSON file")
    cmp.add_argument("--fail-if-slower", metavar="PCT", type=gate.percent,
                     help="exit 1 when B's whole start (or --phase) is more than PCT %% slower than A's")
    cmp.add_argument("--phase", metavar="ID", help="with --fail-if-slower: gate this phase id instead of the "
                     "whole start (e.g. weights_load, torch_compile; every process kind that has it)")
    cmp.add_argument("--allow-different-models", action="store_true", help="compare starts of different models")
    cmp.add_argument("--tempo", metavar="URL", help=tempo_help)
    cmp.add_argument("--jaeger", metavar="URL", help=jaeger_help)
    cmp.add_argument("--json", action="store_true", help=json_help.format(cmd="compare"))

    adv = sub.add_parser("advise", help="advice from the field's playbook, fired by evidence in the trace")
    adv.add_argument("source", nargs="?", help="start to advise on (default: the newest recorded start)")
    adv.add_argument("--tempo", metavar="URL", help=tempo_help)
    adv.add_argument("--jaeger", metavar="URL", help=jaeger_help)
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
    pre.add_argument("--jaeger", metavar="URL", help=jaeger_help)
    pre.add_argument("--json", action="store_true", help=json_help.format(cmd="predict") + " (not with --validate)")
    return p


def _remote(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(Tempo URL, Jaeger URL), at most one set: a flag wins over both settings; two flags, or two settings and
    no flag, are an error (which one to read would be a guess)."""
    t_flag, j_flag = getattr(args, "tempo", None), getattr(args, "jaeger", None)
    if t_flag and j_flag:
        raise ReportError("--tempo and --jaeger both given: fetch from one of them")
    if t_flag or j_flag:
        return t_flag, j_flag
    t_env, j_env = settings.text(settings.TEMPO_URL) or None, settings.text(settings.JAEGER_URL) or None
    if t_env and j_env:
        raise ReportError(f"both {settings.TEMPO_URL.name} and {settings.JAEGER_URL.name} are set: pass --tempo "
                          "URL or --jaeger URL to pick one")
    return t_env, j_env


def _run(args: argparse.Namespace) -> int:
    tempo, args.jaeger = _remote(args)
    if args.cmd == "report":
        return _report(args, tempo)
    if args.cmd not in ("compare", "advise", "predict"):
        raise ReportError(f"unknown command {args.cmd}")
    command = importlib.import_module(f"vllm_otel_startup.cli.{args.cmd}")  # one module per command
    return command.run(args, tempo)


def _report(args: argparse.Namespace, tempo: str | None) -> int:
    from vllm_otel_startup.cli import report

    return report.run(args.source, html=args.html, png=args.png, tempo_url=tempo, trace_id=args.trace,
                      detail=args.detail, as_json=args.json, jaeger_url=args.jaeger, trace_event=args.trace_event)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except ReportError as exc:
        warn(str(exc))
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a command line prints one line, never a traceback
        if settings.flag(settings.DEBUG):
            raise
        warn(f"internal error: {exc.__class__.__name__}: {exc} (OTEL_PYTHON_VLLM_STARTUP_DEBUG=1 shows the traceback)")
        return 2


if __name__ == "__main__":
    sys.exit(main())
