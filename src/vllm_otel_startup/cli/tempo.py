"""Fetch a start from Grafana Tempo's HTTP query API by trace id.

``GET {base}/api/v2/traces/<id>`` answers ``{"trace": {"resourceSpans": [...]}}`` (Tempo >= 2.5), the older
``GET {base}/api/traces/<id>`` answers ``{"batches": [...]}``; both in protobuf-JSON (base64 ids, enum names),
which ``spanmodel.parse_otlp`` reads. A 404 from both is "trace not found". Basic auth from the URL's user
info (a user name alone is a token: sent as the user name, never shown); a multi-tenant Tempo's tenant from
``OTEL_PYTHON_VLLM_STARTUP_TEMPO_TENANT`` (``X-Scope-OrgID``). Every URL in a message or a source label is
shown without its user-info and sensitive query values (``model/redact.py``).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request

from vllm_otel_startup import settings
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.redact import redact_url
from vllm_otel_startup.model.spanmodel import Span, parse_text


def get(url: str, timeout: float, service: str = "Tempo") -> tuple[int, str]:
    """GET ``url`` (JSON), Basic auth from its user info; the status and body. Shared with cli/jaeger.py: only
    Tempo gets the tenant header."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": "application/json"}
    if parts.username is not None:
        cred = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    if service == "Tempo" and (tenant := settings.text(settings.TEMPO_TENANT)):
        headers["X-Scope-OrgID"] = tenant
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own Tempo URL
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReportError(f"cannot reach {service} at {_safe(url)} ({reason})") from None


def _safe(url: str) -> str:
    return redact_url(url)


def fetch_url(url: str, timeout: float = 15.0) -> list[Span]:
    """A trace by its full query URL: Tempo's, or Jaeger v2's (``/api/v3/traces/<id>``: the same JSON reader)."""
    service = "Jaeger" if "/api/v3/traces/" in url else "Tempo"
    status, body = get(url, timeout, service)
    if status == 404:
        raise ReportError(f"trace not found in {service} ({_safe(url)}: HTTP 404)")
    if status != 200:
        first = (body.strip().splitlines() or [""])[0][:160]
        raise ReportError(f"{service} answered HTTP {status} for {_safe(url)}: {first}")
    return parse_text(body, _safe(url))


def fetch(base_url: str, trace_id: str, timeout: float = 15.0) -> list[Span]:
    """The spans of one trace: the v2 API first, the v1 API when v2 is missing (older Tempo)."""
    base = base_url.rstrip("/")
    tid = trace_id.lower()
    status, body = get(f"{base}/api/v2/traces/{tid}", timeout)
    if status == 200:
        return parse_text(body, f"{_safe(base)}/api/v2/traces/{tid}")
    if status == 404:
        status, body = get(f"{base}/api/traces/{tid}", timeout)
        if status == 200:
            return parse_text(body, f"{_safe(base)}/api/traces/{tid}")
    if status == 404:
        raise ReportError(f"trace {tid} not found in Tempo at {_safe(base)} (HTTP 404)")
    first = (body.strip().splitlines() or [""])[0][:160]
    raise ReportError(f"Tempo at {_safe(base)} answered HTTP {status} for trace {tid}: {first}")
