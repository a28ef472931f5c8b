"""model/spanmodel.py: the one span model the report reads. What the agent's encoder writes (its local file and
spool) parses back to the same spans; OTLP JSON in its shapes (hex or base64 ids, enum or number status, Tempo's
``batches`` and ``trace``) reads alike; what is not OTLP JSON is one ReportError naming where."""

from __future__ import annotations

import base64
import json

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.spanmodel import Span, encode, from_readable, otlp_documents, parse_otlp, parse_text


def _sdk_spans() -> list:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "vllm", "process.pid": 7}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("vllm_otel_startup")
    with tracer.start_as_current_span("vLLM startup", context=Context(),  # a root, whatever is current
                                      attributes={"vllm.startup.outcome": "failed"}) as root:
        with tracer.start_as_current_span("Load weights", attributes={
                "n": 3, "x": 0.5, "ok": True, "args": ("vllm", "serve")}) as child:
            child.add_event("exception", {"exception.type": "OSError"})
        root.set_status(Status(StatusCode.ERROR, "model failed to load"))
    return exporter.get_finished_spans()


def test_what_the_encoder_writes_parses_back_to_the_same_spans():
    sdk = _sdk_spans()
    doc = json.loads(json.dumps(encode(sdk)))  # as a file line holds it
    by_name = {s.name: s for s in parse_otlp(doc)}
    for s in sdk:  # an SDK span's tuple reads back as the JSON array it was written as
        direct = from_readable(s)
        direct.attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in direct.attrs.items()}
        assert by_name[s.name] == direct
    child, root = by_name["Load weights"], by_name["vLLM startup"]
    assert child.parent_id == root.span_id and root.parent_id is None
    assert child.attrs == {"n": 3, "x": 0.5, "ok": True, "args": ["vllm", "serve"]}
    assert child.events == [{"name": "exception", "attributes": {"exception.type": "OSError"}}]
    assert (root.status, root.status_message) == (2, "model failed to load")
    assert root.resource == {"service.name": "vllm", "process.pid": 7}
    assert child.duration == (child.end - child.start) / 1e9


def _protobuf_json(trace_hex: str, span_hex: str) -> dict:
    b64 = lambda h: base64.b64encode(bytes.fromhex(h)).decode()  # noqa: E731
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [{
        "traceId": b64(trace_hex), "spanId": b64(span_hex), "name": "s", "startTimeUnixNano": "1",
        "endTimeUnixNano": "2", "status": {"code": "STATUS_CODE_ERROR"},
        "attributes": [{"key": "b", "value": {"boolValue": "true"}}]}]}]}]}


def test_base64_ids_and_enum_status_read_like_hex_and_numbers():
    [s] = parse_otlp(_protobuf_json("ab" * 16, "cd" * 8))
    assert (s.trace_id, s.span_id, s.status, s.attrs) == ("ab" * 16, "cd" * 8, 2, {"b": True})
    with pytest.raises(ValueError, match="bad id"):
        parse_otlp(_protobuf_json("ab" * 15, "cd" * 8))  # 15 bytes is no trace id


def test_tempos_shapes_and_lists_are_otlp_documents():
    otlp = {"resourceSpans": []}
    assert otlp_documents(otlp) == [otlp]
    assert otlp_documents({"batches": [1]}) == [{"resourceSpans": [1]}]
    assert otlp_documents({"trace": {"batches": None}}) == [{"resourceSpans": []}]
    assert otlp_documents([otlp, {"batches": []}]) == [otlp, {"resourceSpans": []}]
    with pytest.raises(ValueError, match="no resourceSpans"):
        otlp_documents({"data": []})


def test_text_is_json_lines_or_one_document_and_each_problem_names_where():
    line = json.dumps(_protobuf_json("ab" * 16, "cd" * 8))
    assert len(parse_text(line + "\n" + line + "\n", "f.jsonl")) == 2
    assert len(parse_text(json.dumps(json.loads(line), indent=2), "one.json")) == 1
    with pytest.raises(ReportError, match=r"^f.jsonl: no spans \(empty file\)$"):
        parse_text(" \n", "f.jsonl")
    with pytest.raises(ReportError, match=r"^f.jsonl:2: not OTLP JSON \(JSONDecodeError"):
        parse_text(line + "\n{truncated\n", "f.jsonl")
    with pytest.raises(ReportError, match=r"^f.json: no spans$"):
        parse_text('{"resourceSpans": []}', "f.json")


def test_a_span_is_plain_data():
    s = Span("t", "s", None, "n", 1_000_000_000, 3_500_000_000, {}, {})
    assert s.duration == 2.5 and s.status == 0 and s.children == [] and s.events == []
