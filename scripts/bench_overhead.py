"""Overhead of the instrumentation, measured side by side in one run (never asserted in tests).

1. Added interpreter start per Python process: `opentelemetry-instrument python -c pass` with our
   instrumentor enabled vs disabled (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup), interleaved pairs.
   This is what every helper process (resource tracker, compile workers) pays.
2. Whole-start overhead: the same real `opentelemetry-instrument vllm serve` of the tiny model, with and
   without our instrumentor, alternating (order flipped every pair), warm caches, stopwatch spawn -> first
   200 on /health. Median of the per-pair ratios.

    python scripts/bench_overhead.py [--interp 40] [--starts 3] [--mode eager|compiled] [--out FILE]
Run it with the e2e venv's python (tests/e2e/bootstrap.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))

import harness  # noqa: E402

DISABLED = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}


def interp(n: int) -> dict:
    bindir = Path(sys.executable).parent
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    cmd = [str(bindir / "opentelemetry-instrument"), sys.executable, "-c", "pass"]
    on, off = [], []
    for i in range(n):
        for enabled in ((True, False) if i % 2 else (False, True)):
            env = dict(base) if enabled else dict(base, **DISABLED)
            t = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            (on if enabled else off).append(time.perf_counter() - t)
    return {"runs_each": n, "median_on_ms": 1e3 * statistics.median(on), "median_off_ms": 1e3 * statistics.median(off),
            "added_ms": 1e3 * (statistics.median(on) - statistics.median(off))}


def starts(n: int, mode: str, workdir: Path) -> dict:
    model = workdir / "tiny-model"
    if not model.exists():
        subprocess.run([sys.executable, str(HERE.parent / "tests/e2e/make_tiny_model.py"), str(model)],
                       check=True, capture_output=True)
    args = ["--enforce-eager"] if mode == "eager" else []
    cache = workdir / f"cache-{mode}"
    # warm every cache once (modelinfo, inductor) so both arms see the same state
    harness.serve(model, cache, None, args=args, files=workdir / "starts")
    pairs = []
    for i in range(n):
        row = {}
        for enabled in ((True, False) if i % 2 else (False, True)):
            st = harness.serve(model, cache, None, args=args, files=workdir / "starts",
                               env={} if enabled else DISABLED)
            row["on" if enabled else "off"] = (st.ready_ns - st.spawn_ns) / 1e9
        pairs.append(row)
        print(f"  pair {i + 1}: on {row['on']:.2f}s off {row['off']:.2f}s", flush=True)
    ratios = [p["on"] / p["off"] for p in pairs]
    return {"mode": mode, "pairs": pairs, "median_ratio": statistics.median(ratios),
            "median_on_s": statistics.median(p["on"] for p in pairs),
            "median_off_s": statistics.median(p["off"] for p in pairs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interp", type=int, default=40, help="pairs of `python -c pass` runs")
    ap.add_argument("--starts", type=int, default=3, help="pairs of real vllm serve starts (0 to skip)")
    ap.add_argument("--mode", choices=["eager", "compiled"], default="eager")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    result: dict = {}
    print(f"interpreter start, {args.interp} interleaved pairs ...", flush=True)
    result["interpreter"] = r = interp(args.interp)
    print(f"  enabled {r['median_on_ms']:.1f} ms, disabled {r['median_off_ms']:.1f} ms, added {r['added_ms']:+.1f} ms")
    if args.starts:
        print(f"whole start ({args.mode}), {args.starts} pairs ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="vos-bench-") as d:
            result["start"] = s = starts(args.starts, args.mode, Path(d))
        print(f"  median ratio with/without {s['median_ratio']:.4f} "
              f"({100 * (s['median_ratio'] - 1):+.2f} %); medians {s['median_on_s']:.2f}s vs {s['median_off_s']:.2f}s")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
