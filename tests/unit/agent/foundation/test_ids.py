"""vLLM seeds Python's global random in every worker; span ids must not repeat across starts because of it."""

from __future__ import annotations

import random

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from vllm_otel_startup.agent.foundation.ids import UrandomIdGenerator


def _ids_after_seed(gen) -> list[int]:
    random.seed(0)  # what vllm's set_random_seed(0) does to the whole process
    return [gen.generate_span_id() for _ in range(3)] + [gen.generate_trace_id()]


def test_sdk_default_ids_repeat_after_vllm_seeds_random():
    assert _ids_after_seed(RandomIdGenerator()) == _ids_after_seed(RandomIdGenerator())  # the bug


def test_our_ids_do_not():
    assert _ids_after_seed(UrandomIdGenerator()) != _ids_after_seed(UrandomIdGenerator())
    assert all(i > 0 for i in _ids_after_seed(UrandomIdGenerator()))
