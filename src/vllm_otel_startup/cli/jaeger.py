"""Fetch a start from Jaeger v2's query API by trace id.

``GET {base}/api/v3/traces/<id>`` (api_v3's HTTP gateway, on the query port, 16686 by default) answers
``{"result": {"resourceSpans": [...]}}``: OTLP JSON as the collector's pdata writes it (hex ids, integer enums,
64-bit integers as strings), which ``spanmodel.parse_otlp`` reads. A trace Jaeger does not hold is HTTP 404 with
``{"error": {"httpCode": 404, "message": ...}}``. Basic auth from the URL's user info, as for Tempo; every URL
in a message is shown without its credentials (``model/redact.py``).
"""

from __future__ import annotations

import json

from vllm_otel_startup.cli.tempo import get
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.redact import redact_url
from vllm_otel_startup.model.spanmodel import Span, parse_text

SERVICE = "Jaeger"


def _message(body: str) -> str:
    """Jaeger's error message from its JSON error body, else the body's first line."""
    try:
        err = json.loads(body).get("error") or {}
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:160]
    except (ValueError, AttributeError):
        pass
    return (body.strip().splitlines() or [""])[0][:160]


def fetch(base_url: str, trace_id: str, timeout: float = 15.0) -> list[Span]:
    """The spans of one trace from Jaeger v2 (``/api/v3/traces/<id>``)."""
    base = base_url.rstrip("/")
    tid = trace_id.lower()
    status, body = get(f"{base}/api/v3/traces/{tid}", timeout, SERVICE)
    if status == 200:
        return parse_text(body, f"{redact_url(base)}/api/v3/traces/{tid}")
    if status == 404:
        raise ReportError(f"trace {tid} not found in Jaeger at {redact_url(base)} (HTTP 404)")
    raise ReportError(f"Jaeger at {redact_url(base)} answered HTTP {status} for trace {tid}: {_message(body)}")
