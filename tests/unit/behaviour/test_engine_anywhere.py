"""An engine is a start wherever it is created (issue 60): a multiprocessing child of a program that is not vLLM's
server (``vllm bench startup`` builds each iteration's ``LLM`` in one) may become a start's root; vLLM's own
children never do (vLLM's own spans outside any start: agent/foundation/test_fragments.py)."""

from __future__ import annotations

import os
import time

import pytest

from vllm_otel_startup.agent.foundation.process import ENV_KIND, ENV_PARENT, OTHER, ProcessInfo, classify

SPAWNED = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
           "--multiprocessing-fork"]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _info(argv: list[str], environ: dict[str, str]) -> ProcessInfo:
    now = time.time_ns()
    return ProcessInfo(classify(argv, environ), os.getpid(), now, "proc", now, argv)


@pytest.mark.parametrize("argv, environ, may", [
    (SPAWNED, {}, True),  # a multiprocessing child of any program: vllm bench startup's iterations, a host's workers
    (["python", "script.py"], {}, True),  # a user's script
    (SPAWNED, {ENV_KIND: "engine_core", ENV_PARENT: TRACEPARENT}, False),  # vLLM's own child (a spawn patch point)
    (SPAWNED, {ENV_PARENT: TRACEPARENT}, False),  # handed a parent span: part of a start already
    (["python", "-m", "torch._inductor.compile_worker"], {}, False),  # a helper
    (["vllm", "serve", "m"], {}, False),  # the API server: a root by its command line
])
def test_who_may_start_an_engine_of_its_own(monkeypatch, argv, environ, may):
    for k in (ENV_KIND, ENV_PARENT):
        monkeypatch.delenv(k, raising=False)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    assert _info(argv, environ).may_embed() is may


def test_a_multiprocessing_child_without_vllms_marks_is_other():
    assert classify(SPAWNED, {}) == OTHER
