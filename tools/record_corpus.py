"""Record a corpus of real instrumented starts (local OTLP-JSON files) over models of several sizes, eager and
compiled, cold and warm: the data `vllm-otel-startup predict` is fitted and validated on.

    python -m tools.record_corpus OUT_DIR [--quick]

Run it with the e2e venv's python (tests/e2e/bootstrap.sh). Each start is written to
OUT_DIR/<name>/<trace_id>.jsonl; a start that fails is reported and skipped. Takes ~15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from support import harness

# (layers, hidden): from the 1.7 MB default to ~200 MB of float32 weights
SIZES = [(1, 128), (2, 128), (4, 256), (8, 256), (2, 512), (6, 512), (4, 1024), (8, 1024)]
COMPILED = [(2, 128), (4, 256), (8, 256)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--quick", action="store_true", help="two sizes only (a smoke run)")
    a = ap.parse_args()
    sizes, compiled = (SIZES[:2], COMPILED[:1]) if a.quick else (SIZES, COMPILED)
    plan = [(s, "eager", w) for s in sizes for w in ("cold", "warm")] + [(s, "compiled", w) for s in compiled
                                                                         for w in ("cold", "warm")]
    models, caches = a.out / "models", a.out / "caches"
    for (layers, hidden), mode, warmth in plan:
        model = models / f"l{layers}-h{hidden}"
        if not (model / "model.safetensors").exists():
            harness.make_tiny_model(model, "--layers", str(layers), "--hidden", str(hidden))
        cache = caches / f"{model.name}-{mode}"
        if warmth == "cold":
            shutil.rmtree(cache, ignore_errors=True)
        name = f"{model.name}-{mode}-{warmth}"
        args = ["--enforce-eager"] if mode == "eager" else []
        try:
            st = harness.serve(model, cache, None, args=args, files=a.out / name, timeout=900)
            print(f"{name}: ready in {(st.ready_ns - st.spawn_ns) / 1e9:.1f} s", flush=True)
        except AssertionError as exc:
            print(f"{name}: FAILED ({str(exc)[-300:]})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
