"""Convert the GPU machine's OTLP sink rows (../shared/gpu/otlp_sink.py: one JSON line per span, protobuf decoded
with MessageToDict) into the OTLP JSON lines the local file exporter writes, for tests/data/starts/gpu.

    python -m tools.gpu_sink_to_otlp runs/03_dp2_warm_otlp/spans.jsonl tests/data/starts/gpu/NAME.jsonl.gz

MessageToDict writes int64 values as strings: a string of digits becomes an int again (our attributes never hold a
string of digits). Ids are base64 there, hex here."""

from __future__ import annotations

import base64
import gzip
import json
import re
import sys
from collections import defaultdict

INT = re.compile(r"^-?\d+$")


def value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, int) or (isinstance(v, str) and INT.match(v)):
        return {"intValue": str(int(v))}
    if isinstance(v, dict) and "values" in v:  # an arrayValue as MessageToDict leaves it
        return {"arrayValue": {"values": [value(next(iter(x.values()), None)) for x in v["values"]]}}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": "" if v is None else str(v)}


def attributes(d: dict) -> list[dict]:
    return [{"key": k, "value": value(v)} for k, v in d.items()]


def hexid(b64: str | None) -> str:
    return base64.b64decode(b64).hex() if b64 else ""


def convert(rows: list[dict]) -> list[dict]:
    by_resource: dict[str, list[dict]] = defaultdict(list)
    resources: dict[str, dict] = {}
    for r in rows:
        key = json.dumps(r.get("resource") or {}, sort_keys=True)
        resources[key] = r.get("resource") or {}
        span = {"traceId": hexid(r["trace_id"]), "spanId": hexid(r["span_id"]),
                "parentSpanId": hexid(r.get("parent_id")), "name": r["name"],
                "startTimeUnixNano": str(r["start"]), "endTimeUnixNano": str(r["end"]),
                "attributes": attributes(r.get("attrs") or {}), "status": r.get("status") or {},
                "events": [{"name": e.get("name", ""), "timeUnixNano": str(e.get("time", 0)),
                            "attributes": attributes(e.get("attrs") or {})} for e in r.get("events") or []]}
        by_resource[key].append(span)
    return [{"resourceSpans": [{"resource": {"attributes": attributes(resources[k])},
                                "scopeSpans": [{"scope": {"name": "vllm_otel_startup"}, "spans": spans}]}]}
            for k, spans in by_resource.items()]


def main(src: str, dst: str) -> None:
    with open(src) as f:
        rows = [json.loads(line) for line in f]
    with gzip.open(dst, "wt") as f:
        for doc in convert(rows):
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
