"""model/errors.py: the command line's one error type; its message is what the user reads after the prefix."""

from __future__ import annotations

import pytest

from vllm_otel_startup.model.errors import ReportError


def test_a_report_error_is_an_exception_that_carries_its_message():
    with pytest.raises(ReportError) as raised:
        raise ReportError("start.jsonl: no such file")
    assert str(raised.value) == "start.jsonl: no such file"
    assert isinstance(raised.value, Exception) and not isinstance(raised.value, (OSError, ValueError))
