"""What every command prints besides its result: one-line warnings (scrubbed of secrets) and notes kept off stdout
when stdout holds a JSON document."""

from __future__ import annotations

import sys

from vllm_otel_startup.model.redact import scrub


def warn(msg: str) -> None:
    print(f"vllm-otel-startup: {scrub(msg)}", file=sys.stderr)


def to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr)
