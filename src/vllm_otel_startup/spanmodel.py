"""The span model shared by the report, the metrics and the tests: OTLP/JSON in, plain spans out, and the
SDK's ReadableSpan converted to the same model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


def _val(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_val(x) for x in v["arrayValue"].get("values", [])]
    return None


def _attrs(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _val(a.get("value", {})) for a in items or []}


def parse_otlp(doc: dict[str, Any]) -> list[Span]:
    out: list[Span] = []
    for rs in doc.get("resourceSpans", []):
        res = _attrs(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                status = s.get("status", {})
                out.append(Span(
                    trace_id=s["traceId"], span_id=s["spanId"], parent_id=s.get("parentSpanId") or None,
                    name=s["name"], start=int(s["startTimeUnixNano"]), end=int(s["endTimeUnixNano"]),
                    attrs=_attrs(s.get("attributes")), resource=res,
                    status=int(status.get("code", 0)), status_message=status.get("message", ""),
                    events=[{"name": e.get("name", ""), "attributes": _attrs(e.get("attributes"))}
                            for e in s.get("events", [])],
                ))
    return out


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
