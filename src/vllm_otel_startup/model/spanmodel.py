"""The span model shared by the report, the metrics and the tests, and the one OTLP/JSON decoder: OTLP/JSON
in (a document, a Tempo answer or a file's text), plain spans out; the SDK's ReadableSpan converted to the
same model; and its encoder (``encode``: SDK ReadableSpans to OTLP/JSON), which the agent's local file and
spool write.

``parse_otlp`` reads both OTLP/JSON spellings: the OTLP/HTTP JSON encoding (hex ids, as our file exporter
writes them) and the protobuf-JSON mapping (base64 ids, enum names such as ``STATUS_CODE_ERROR``), which is
what Tempo's query API returns (Jaeger v2's api_v3 writes the first, inside
``{"result": ...}``); ``instrumentationLibrarySpans`` (OTLP < 0.15) is read like ``scopeSpans``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.redact import scrubbed


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    resource: dict[str, Any]
    status: int = 0  # OTLP status code: 0 unset, 1 ok, 2 error
    status_message: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    children: list[Span] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return (self.end - self.start) / 1e9


_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2, "UNSET": 0, "OK": 1, "ERROR": 2}


def _val(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        b = v["boolValue"]
        return b.lower() == "true" if isinstance(b, str) else bool(b)
    if "arrayValue" in v:
        return [_val(x) for x in (v["arrayValue"] or {}).get("values", [])]
    return None


def _id(raw: Any, nbytes: int) -> str:
    """A trace or span id as lowercase hex: hex as written (OTLP/HTTP JSON) or base64 (protobuf JSON)."""
    if not raw:
        return ""
    text = str(raw)
    if len(text) == 2 * nbytes:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"bad id {text!r}") from None
    if len(data) != nbytes:
        raise ValueError(f"bad id {text!r}")
    return data.hex()


def _status(status: dict[str, Any]) -> int:
    code = status.get("code", 0)
    if isinstance(code, str) and not code.lstrip("-").isdigit():
        return _STATUS.get(code.upper(), 0)
    return int(code)


def _attrs(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _val(a.get("value", {})) for a in items or []}


def parse_otlp(doc: dict[str, Any]) -> list[Span]:
    out: list[Span] = []
    for rs in doc.get("resourceSpans", []):
        res = _attrs(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for s in ss.get("spans", []):
                status = s.get("status") or {}
                out.append(Span(
                    trace_id=_id(s["traceId"], 16), span_id=_id(s["spanId"], 8),
                    parent_id=_id(s.get("parentSpanId"), 8) or None,
                    name=s["name"], start=int(s["startTimeUnixNano"]), end=int(s["endTimeUnixNano"]),
                    attrs=_attrs(s.get("attributes")), resource=res,
                    status=_status(status), status_message=status.get("message", ""),
                    events=[{"name": e.get("name", ""), "attributes": _attrs(e.get("attributes"))}
                            for e in s.get("events", [])],
                ))
    return out


def otlp_documents(doc: Any) -> list[dict[str, Any]]:
    """The ExportTraceServiceRequest-shaped documents inside one JSON value: OTLP (``resourceSpans``), Tempo's
    ``/api/traces`` (``batches``) and ``/api/v2/traces`` (``{"trace": {...}}``), Jaeger v2's
    ``/api/v3/traces`` (``{"result": {...}}``), or a list of those."""
    if isinstance(doc, list):
        return [d for item in doc for d in otlp_documents(item)]
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    for wrapper in ("trace", "result"):
        if wrapper in doc and isinstance(doc[wrapper], dict):
            return otlp_documents(doc[wrapper])
    if "batches" in doc:
        return [{"resourceSpans": doc["batches"] or []}]
    if "resourceSpans" in doc:
        return [doc]
    raise ValueError("no resourceSpans")


def parse_text(text: str, where: str) -> list[Span]:
    """Spans from a file's (or an HTTP answer's) text: JSON lines (ours) or one JSON document."""
    import json  # here, not at the top: the printout at ready imports this module and never reads text

    if not text.strip():
        raise ReportError(f"{where}: no spans (empty file)")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    chunks: list[tuple[str, str]]
    if len(lines) > 1 and lines[0].lstrip().startswith("{") and lines[0].rstrip().endswith("}"):
        chunks = [(f"{where}:{n}", ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    else:
        chunks = [(where, text)]
    spans: list[Span] = []
    for at, chunk in chunks:
        try:
            for d in otlp_documents(json.loads(chunk)):
                spans.extend(parse_otlp(d))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ReportError(f"{at}: not OTLP JSON ({exc.__class__.__name__}: {str(exc)[:120]})") from None
    if not spans:
        raise ReportError(f"{where}: no spans")
    return spans


def from_readable(s: Any) -> Span:
    """An SDK ReadableSpan (ended) in this model."""
    ctx = s.context
    return Span(
        trace_id=f"{ctx.trace_id:032x}", span_id=f"{ctx.span_id:016x}",
        parent_id=f"{s.parent.span_id:016x}" if s.parent is not None else None,
        name=s.name, start=int(s.start_time or 0), end=int(s.end_time or 0), attrs=dict(s.attributes or {}),
        resource=dict(s.resource.attributes) if s.resource is not None else {},
        status={"UNSET": 0, "OK": 1, "ERROR": 2}[s.status.status_code.name], status_message=s.status.description or "",
        events=[{"name": e.name, "attributes": dict(e.attributes or {})} for e in s.events],
    )


# ---- the encoder: the agent's local file and spool write what the decoder above reads --------------------
def _otlp_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_otlp_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _otlp_attrs(attrs: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": _otlp_value(v)} for k, v in (attrs or {}).items()]


def encode(spans: Sequence[Any]) -> dict[str, Any]:
    """OTLP/JSON ``ExportTraceServiceRequest`` for SDK ReadableSpans (hex ids, string nanos; the resource's
    attributes scrubbed): what ``parse_otlp`` reads back. Duck-typed: no SDK import here."""
    by_resource: dict[int, tuple[Any, dict[str, list[dict[str, Any]]]]] = {}
    for s in spans:
        res, scopes = by_resource.setdefault(id(s.resource), (s.resource, {}))
        scope = s.instrumentation_scope.name if s.instrumentation_scope else ""
        ctx = s.context
        item: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": s.name,
            "kind": int(s.kind.value) + 1,
            "startTimeUnixNano": str(s.start_time),
            "endTimeUnixNano": str(s.end_time),
            "attributes": _otlp_attrs(s.attributes),
            "status": {"code": {"UNSET": 0, "OK": 1, "ERROR": 2}[s.status.status_code.name]},
        }
        if s.parent is not None:
            item["parentSpanId"] = f"{s.parent.span_id:016x}"
        if s.status.description:
            item["status"]["message"] = s.status.description
        if s.events:
            item["events"] = [
                {"name": e.name, "timeUnixNano": str(e.timestamp), "attributes": _otlp_attrs(e.attributes)}
                for e in s.events
            ]
        scopes.setdefault(scope, []).append(item)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _otlp_attrs(scrubbed(res.attributes))},
                "scopeSpans": [{"scope": {"name": n}, "spans": sp} for n, sp in scopes.items()],
            }
            for res, scopes in by_resource.values()
        ]
    }
