"""The process group's communicator on `Process group init` (causes/config.py ProcessGroup): vLLM's arguments, and
the world size of the group the rank joined where torch.distributed has one (vLLM widens its argument across data
parallel ranks inside the call)."""

from __future__ import annotations

import sys
import types

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call
from vllm_otel_startup.agent.causes.config import ProcessGroup


class FakeSpan:
    def __init__(self) -> None:
        self.attrs: dict = {}

    def set_attribute(self, key, value) -> None:
        self.attrs[key] = value


def _call(*args, **kwargs) -> Call:
    return Call(None, args, kwargs, None, "process_group")


def test_backend_and_world_size_from_the_call(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    span = FakeSpan()
    ProcessGroup().after_call(None, span, _call(2, 1, "env://", 1, "gloo"))
    assert span.attrs == {sc.PARALLEL_BACKEND: "gloo", sc.PARALLEL_WORLD_SIZE: 2}


def test_the_joined_groups_world_size_wins_where_torch_distributed_has_one(monkeypatch):
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True, get_world_size=lambda: 4)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    span = FakeSpan()
    ProcessGroup().after_call(None, span, _call(world_size=2, backend="nccl"))
    assert span.attrs == {sc.PARALLEL_BACKEND: "nccl", sc.PARALLEL_WORLD_SIZE: 4}


def test_nothing_without_a_span_or_with_unusable_values(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    ProcessGroup().after_call(None, None, _call(2, 0, "env://", 0, "nccl"))  # no span of ours: nothing to do
    span = FakeSpan()
    ProcessGroup().after_call(None, span, _call(-1, -1, "env://", -1, ""))
    assert span.attrs == {}
