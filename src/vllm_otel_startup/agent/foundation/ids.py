"""Span and trace ids that vLLM's seeding cannot repeat.

The SDK's default RandomIdGenerator draws from Python's global ``random``; vLLM calls
``set_random_seed(seed)`` in every worker, so from then on every start produced the same span ids, and a
trace store keeps the first of each id: later starts silently lost those spans. Ids here come from
``os.urandom`` (unaffected by seeding, distinct in forked children).
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator


class UrandomIdGenerator(IdGenerator):
    def generate_span_id(self) -> int:
        while True:
            value = int.from_bytes(os.urandom(8), "big")
            if value != trace.INVALID_SPAN_ID:
                return value

    def generate_trace_id(self) -> int:
        while True:
            value = int.from_bytes(os.urandom(16), "big")
            if value != trace.INVALID_TRACE_ID:
                return value
