"""The process kinds (agent/foundation/kinds.py): the one spelling of each kind, the values the process spans carry,
the patch table uses and the spawn environment hands a child."""

from __future__ import annotations

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import kinds
from vllm_otel_startup.agent.foundation.kinds import (
    ANY,
    API_SERVER,
    EMBEDDED,
    ENGINE_CORE,
    HELPER,
    OTHER,
    TRACED,
    WORKER,
)
from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS, PROCESS_SPANS
from vllm_otel_startup.agent.foundation.process import ENV_KIND, classify


def test_the_kinds_are_the_documented_attribute_values_and_all_distinct():
    assert (API_SERVER, ENGINE_CORE, WORKER, HELPER, OTHER) == ("api_server", "engine_core", "worker", "helper",
                                                               "other")
    assert EMBEDDED == "embedded" and ANY == "any"
    spelled = [v for k, v in vars(kinds).items() if k.isupper() and isinstance(v, str)]
    assert len(spelled) == len(set(spelled)) == 7


def test_the_traced_kinds_are_those_with_a_process_span_in_the_order_a_start_makes_them():
    assert TRACED == (API_SERVER, ENGINE_CORE, WORKER)
    assert tuple(PROCESS_SPANS) == TRACED


def test_every_patch_row_names_its_processes_by_these_kinds():
    assert {p.process for p in PATCH_POINTS} <= {*TRACED, ANY}
    assert {p.ends for p in PATCH_POINTS if p.ends is not None} <= {*TRACED, EMBEDDED}
    assert {p.child for p in PATCH_POINTS if p.child is not None} <= set(TRACED)  # a launcher spawns API servers
    assert ANY in {p.process for p in PATCH_POINTS} and EMBEDDED in {p.ends for p in PATCH_POINTS}


def test_a_process_is_classified_as_one_of_these_kinds():
    assert classify(["/usr/bin/vllm", "serve", "m"], {}) == API_SERVER
    assert classify(["python", "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"],
                    {ENV_KIND: WORKER}) == WORKER  # a spawned child: the kind its parent put in the environment
    assert classify(["python", "-m", "torch._inductor.compile_worker"], {}) == HELPER
    assert classify(["python", "script.py"], {}) == OTHER


@pytest.mark.parametrize("kind", TRACED)
def test_a_traced_process_span_carries_its_kind(start, kind):
    s = start(kind)
    s.rt.finish()
    [span] = s.spans(PROCESS_SPANS[kind])
    assert span.attributes[sc.PROCESS_KIND] == kind
