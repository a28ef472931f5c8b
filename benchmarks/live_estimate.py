"""The readiness estimate's error on real starts with history, by phase (docs/results.md, "Live startup").

Runs real `opentelemetry-instrument vllm serve` starts of the tiny model (support/harness.py) one after another
into one start-file directory, so each start's estimate comes from the starts before it of the same model and
configuration (the same way a node's history grows). Every progress message of a start with history
("starting: <phase> ... ready in ~R s (T s since start ...)") is compared with the remaining time measured:
the start's spawn -> first 200 on /health minus T. Per phase (the phase the message names): messages, mean
estimate, mean actual remaining, mean absolute error, mean absolute error as a share of the actual.

    python -m benchmarks live-estimate [--runs 3] [--interval-ms 2000] [--out FILE]

Series: `compiled-cold` (a fresh cache root each start: every start compiles), `eager-warm` (one cache root:
the first start is cold and only gives the warm ones nothing; the others are warm with warm history).
Run it with the e2e venv's python, one start at a time (flock /tmp/vos-e2e.lock).
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from pathlib import Path

from benchmarks import command_parser
from support import harness

LINE = re.compile(r"vllm-otel-startup: starting: (?P<name>.+?) [\d.]+ s(?: of ~[\d.]+ s, ready in ~(?P<rem>[\d.]+) s)? "
                  r"\((?P<at>[\d.]+) s since start(?:; from (?P<n>\d+) recorded)?")


def messages(log: str, total: float) -> list[dict]:
    out = []
    for m in LINE.finditer(log):
        if m.group("rem") is None:
            continue
        at = float(m.group("at"))
        out.append({"phase": m.group("name"), "at_s": at, "estimate_s": float(m.group("rem")),
                    "actual_s": max(0.0, total - at), "history": int(m.group("n") or 0)})
    return out


def run(runs: int, interval_ms: int, workdir: Path) -> dict:
    model = workdir / "tiny-model"
    harness.make_tiny_model(model)
    env = {"OTEL_PYTHON_VLLM_STARTUP_LIVE_INTERVAL_MS": str(interval_ms), "OTEL_TRACES_EXPORTER": "vllm_startup_file"}
    series = {"compiled-cold": ([], lambda i: workdir / f"cc-{i}"),
              "eager-warm": (["--enforce-eager"], lambda i: workdir / "ew")}
    out: dict = {}
    for name, (args, cache) in series.items():
        files = workdir / f"files-{name}"
        starts = []
        for i in range(runs):
            st = harness.serve(model, cache(i), None, args=args, files=files, env=env, name=f"{name}-{i}")
            total = (st.ready_ns - st.spawn_ns) / 1e9
            rows = messages(st.log, total)
            starts.append({"total_s": total, "messages": rows, "no_estimate": st.log.count("no estimate")})
            print(f"{name} #{i}: ready in {total:.1f} s, {len(rows)} messages with an estimate", flush=True)
        out[name] = starts
    return out


def table(result: dict) -> str:
    lines = []
    for name, starts in result.items():
        rows = [r for st in starts for r in st["messages"]]
        by: dict[str, list[dict]] = {}
        for r in rows:
            by.setdefault(r["phase"], []).append(r)
        totals = ", ".join(f"{st['total_s']:.1f}" for st in starts)
        lines += [f"{name}: {len(starts)} starts ({totals} s), "
                  f"{len(rows)} messages with an estimate", "",
                  "| phase (as the message names it) | messages | mean estimate | mean actual remaining | "
                  "mean abs. error | error / actual |", "|---|---:|---:|---:|---:|---:|"]
        for phase, rs in sorted(by.items(), key=lambda kv: min(r["at_s"] for r in kv[1])):
            err = [abs(r["estimate_s"] - r["actual_s"]) for r in rs]
            act = statistics.fmean(r["actual_s"] for r in rs)
            lines.append(f"| {phase} | {len(rs)} | {statistics.fmean(r['estimate_s'] for r in rs):.1f} s | "
                         f"{act:.1f} s | {statistics.fmean(err):.1f} s | "
                         f"{100 * statistics.fmean(err) / act if act else 0:.0f} % |")
        if rows:
            err = [abs(r["estimate_s"] - r["actual_s"]) for r in rows]
            act = statistics.fmean(r["actual_s"] for r in rows)
            lines.append(f"| **all** | {len(rows)} | {statistics.fmean(r['estimate_s'] for r in rows):.1f} s | "
                         f"{act:.1f} s | {statistics.fmean(err):.1f} s | {100 * statistics.fmean(err) / act:.0f} % |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("live-estimate", __doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval-ms", type=int, default=2000)
    ap.add_argument("--out", help="write the raw rows as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vos-live-est-") as d:
        result = run(args.runs, args.interval_ms, Path(d))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(table(result))
