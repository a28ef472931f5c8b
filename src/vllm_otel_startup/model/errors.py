"""The one error type of the command line: its message is printed as ``vllm-otel-startup: <message>`` (exit 2)."""

from __future__ import annotations


class ReportError(Exception):
    pass
