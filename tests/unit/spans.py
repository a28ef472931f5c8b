"""What a span carries, stated whole: ``assert_attributes(span, expected, allow=...)`` fails on a missing key, a
different value AND an attribute nobody named, so a leaked extra (a secret, a stale key, a wrong phase's
attribute) cannot pass unnoticed the way a per-key assert lets it.

``expected`` maps each key to its value (``ANY`` where only its presence is the contract: a timing, a path);
``allow`` names keys that may be there or not, with any value: the readings a test does not control (the resource
sampler's, RESOURCE) or facts of the host."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from unittest.mock import ANY

from vllm_otel_startup import semconv as sc

__all__ = ["ANY", "RESOURCE", "assert_attributes", "process_attributes"]

# The resource sampler's readings on a span (agent/resources/sampler.py): what this machine did meanwhile.
RESOURCE = frozenset(v for k, v in vars(sc).items() if k.startswith("RES_") and isinstance(v, str))


def assert_attributes(span, expected: Mapping[str, object], allow: Iterable[str] = RESOURCE) -> None:
    """The span's attributes are exactly ``expected`` (values compared with ``==``; tuples and lists alike),
    plus any of ``allow``."""
    got = dict(getattr(span, "attributes", span) or {})
    allowed = set(allow)
    name = getattr(span, "name", "the span")
    missing = sorted(k for k in expected if k not in got)
    extra = sorted(k for k in got if k not in expected and k not in allowed)
    wrong = {k: (got[k], v) for k, v in expected.items()
             if k in got and not _same(got[k], v)}
    assert not (missing or extra or wrong), (
        f"{name}: missing {missing}, unexpected {[(k, got[k]) for k in extra]}, "
        f"different (got, expected) {wrong}; all: {got}")


def _same(got: object, want: object) -> bool:
    if want is ANY:
        return True
    if isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)):
        return list(got) == list(want)
    return bool(want == got)


def process_attributes(kind: str, **more: object) -> dict[str, object]:
    """What a process span of the ``start`` fixture's process (tests/unit/conftest.py: ``vllm serve m``, its create
    time read from /proc) carries at its end, plus ``more`` (an outcome, an error type): the figures of its coverage
    and patch table are there, their values the process's own."""
    return {"process.pid": os.getpid(), "process.parent_pid": os.getppid(), sc.PROCESS_CREATE_TIME_SOURCE: "proc",
            sc.PHASE: f"{kind}_process", sc.PROCESS_KIND: kind, sc.COMMAND_ARGS: ("vllm", "serve", "m"),
            sc.PATCH_APPLIED: ANY, sc.PATCH_NATIVE: ANY, sc.PATCH_FRAMELESS: ANY, sc.UNEXPLAINED_S: ANY,
            sc.LARGEST_GAP_S: ANY, sc.LARGEST_GAP_AFTER: ANY, **more}
