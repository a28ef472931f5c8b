"""Command line: ``vllm-otel-startup report [FILE]``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-otel-startup", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    rep = sub.add_parser("report", help="print the phase breakdown of a recorded start")
    rep.add_argument("source", nargs="?", help="startup trace file (OTLP JSON lines); default: the latest")
    args = parser.parse_args(argv)
    from . import report

    try:
        return report.run(args.source)
    except report.ReportError as exc:
        print(f"vllm-otel-startup: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
