"""Arms and pairs: what every side-by-side benchmark here shares. Arms run in turn, their order flipped every pair or
round (neither arm always first: a host that warms or tires over a run shows in both alike); with more than two arms
the order of a round is a row of a Williams Latin square (each arm in each position equally often, each arm after
each other arm equally often); a variant arm is a name and its extra environment variables (or a named preset);
each run starts from the caller's environment less OpenTelemetry's own settings."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
Arm = tuple[str, "dict[str, str] | None"]  # a name and its extra environment; None: plain (no agent)


def rotated(items: Sequence[T], pair: int) -> list[T]:
    """``items`` in their order in odd pairs, reversed in even ones (pair 0 too): the order flipped every pair."""
    return list(items) if pair % 2 else list(items)[::-1]


def clean_env() -> dict[str, str]:
    """The caller's environment without any ``OTEL_*`` setting: each arm sets its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def parse_variants(specs: list[str]) -> dict[str, dict[str, str]]:
    """``--variant NAME=K=V,K=V`` specs as {NAME: environment}; a value that is a list goes on after a comma
    (``nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes``); an ``env…`` arm may add nothing; a preset's name
    alone (``sdkoff``, ``launcher``, ``sdkdefaults``, ``otelonly``, ``env``: arm_presets.py) is that preset."""
    from benchmarks.arm_presets import PRESETS

    out = {}
    for spec in specs:
        if spec in PRESETS:  # a named arm alone (arm_presets.py)
            out[spec] = dict(PRESETS[spec])
            continue
        name, _, rest = spec.partition("=")
        env: dict[str, str] = {}
        for kv in (x for x in rest.split(",") if x):
            if "=" in kv or not env:
                key, _, value = kv.partition("=")
                env[key] = value
            else:  # a list value's next item: OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes
                env[key] += f",{kv}"
        if not name or not (env or name.startswith("env")):  # an `env…` arm may add nothing
            raise SystemExit(f"--variant {spec!r}: NAME=KEY=VALUE[,KEY=VALUE...] (or env…= alone)")
        out[name] = env
    return out


def parse_arms(specs: list[str]) -> dict[str, dict[str, str] | None]:
    """``plain`` -> None (no opentelemetry-instrument); NAME[=K=V;K=V] -> its extra environment (a NAME beginning with
    ``plain``: no opentelemetry-instrument either, :func:`instrumented`)."""
    arms: dict[str, dict[str, str] | None] = {}
    for spec in specs:
        name, _, kv = spec.partition("=")
        if name == "plain":
            arms[name] = None
            continue
        arms[name] = dict(x.split("=", 1) for x in kv.split(";")) if kv else {}
    return arms


def instrumented(arm: str) -> bool:
    return not arm.startswith("plain")


RERUN = 1000  # a pair a queue ran again counts as round pair + RERUN (once more: + 2 x RERUN, ...)


def queue_runs(dirs: list[Path], label: str) -> Iterator[tuple[int, str, Path]]:
    """(pair, arm, folder) of each start the GPU driver ran from a queue's ``<label><pair>_<arm>`` entries (its run
    folders are ``NN_<entry name>``), in queue order. A pair's arm met again (a call that started the queue over)
    begins a round of its own, ``pair + RERUN`` (then ``+ 2 x RERUN``): its starts are paired with each other, never
    with the first run's (a round split across two calls that continue one queue stays one round)."""
    name = re.compile(rf"\d+_{label}(\d+)_(\w+)$")
    seen: Counter[tuple[int, str]] = Counter()
    for d in dirs:
        for run in sorted(p for p in d.iterdir() if p.is_dir()):
            if m := name.match(run.name):
                pair, arm = int(m.group(1)), m.group(2)
                again = seen[(pair, arm)]
                seen[(pair, arm)] += 1
                yield pair + again * RERUN, arm, run


def williams_row(k: int, row: int) -> list[int]:
    """Row ``row`` of a Williams design for ``k`` arms (indices 0..k-1): each row a Latin square's, so over k rows
    each arm takes each position once; the first row 0, 1, k-1, 2, k-2, ... shifted by the row number, so each arm
    directly follows each other arm once over k rows (even k). An odd k needs the k rows again reversed for that: the
    design's period is k (even) or 2k (odd), each half of it a Latin square."""
    first = [0] + [(j + 1) // 2 if j % 2 else k - j // 2 for j in range(1, k)]
    period = k if k % 2 == 0 else 2 * k
    row %= period
    order = [(x + row) % k for x in first]
    return order if row < k else [(x + row - k) % k for x in first][::-1]


def square_period(k: int) -> int:
    """Rounds after which every arm has taken every position equally often and followed every other arm equally
    often (a multiple of k positions-wise): k arms even, 2k odd."""
    return k if k % 2 == 0 else 2 * k


def arms_of(pair: int, variants: dict[str, dict[str, str]]) -> list[Arm]:
    """A round's arms in its order: plain, the agent, then each variant, ordered by row ``pair - 1`` of a Williams
    square (round 1 is row 0; round 0, a warm-up, the square's last row): a queue continued with ``--first-pair``
    goes on with the same square. Two arms: plain first in odd rounds, the agent first in even ones."""
    arms = [("plain", None), ("instr", {}), *variants.items()]
    return [arms[i] for i in williams_row(len(arms), pair - 1)]
