"""One patched call as a cause probe sees it (agent/foundation/calls.py): what the call got and returned, read by
argument name or position the way the wrapped function binds them."""

from __future__ import annotations

import dataclasses

import pytest

from vllm_otel_startup.agent.foundation.calls import Call


def test_an_argument_is_read_by_name_first_then_by_position_else_none():
    call = Call(instance=None, args=("facebook/opt-125m", "auto"), kwargs={"revision": "main"}, result=42)
    assert call.arg(0, "model") == "facebook/opt-125m"  # passed by position
    assert call.arg(2, "revision") == "main"  # passed by name
    assert call.arg(5, "trust_remote_code") is None  # not passed: the function's default is unknown here


def test_a_keyword_wins_over_a_positional_at_the_same_index():
    call = Call(None, ("positional",), {"model": "keyword"}, None)
    assert call.arg(0, "model") == "keyword"


def test_a_keyword_passed_as_none_is_none_not_the_positional():
    call = Call(None, ("positional",), {"model": None}, None)
    assert call.arg(0, "model") is None


def test_a_call_is_what_returned_and_cannot_be_changed_by_a_probe():
    call = Call(instance="self", args=(1,), kwargs={}, result="done")
    assert (call.instance, call.result, call.kind) == ("self", "done", None)  # kind: none until the probes name it
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.result = "other"  # type: ignore[misc]
    named = dataclasses.replace(call, kind="weights_download")
    assert named.kind == "weights_download" and named.args == call.args and call.kind is None
