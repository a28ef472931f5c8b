"""Convert a recorded start (our OTLP JSON lines) into the JSON Grafana Tempo's query API answers for it:
``GET /api/v2/traces/<id>`` -> ``{"trace": {"resourceSpans": [...]}}`` and ``GET /api/traces/<id>`` ->
``{"batches": [...]}``, in Tempo's protobuf-JSON spelling (base64 ids, enum names for kind and status
code, 64-bit integers as strings), one ResourceSpans per process as Tempo merges them. Shape from Tempo's
docs ("Push spans with HTTP": the v2 example response) and grafana/tempo#3802 (v1 ``batches``).

    python -m tools.tempo_fixture START.jsonl[.gz] OUT_V2.json [OUT_V1.json]

Tempo itself cannot run here; tests serve these files from a local http.server.
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
from collections.abc import Callable
from typing import Any

KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
         "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"]
CODES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]


def b64(hexid: str) -> str:
    return base64.b64encode(bytes.fromhex(hexid)).decode()


def span(s: dict[str, Any]) -> dict[str, Any]:
    out = dict(s)
    out["traceId"] = b64(s["traceId"])
    out["spanId"] = b64(s["spanId"])
    if s.get("parentSpanId"):
        out["parentSpanId"] = b64(s["parentSpanId"])
    out["kind"] = KINDS[int(s.get("kind", 1))]
    status = s.get("status") or {}
    code = int(status.get("code", 0))
    out["status"] = {**({"code": CODES[code]} if code else {}),
                     **({"message": status["message"]} if status.get("message") else {})}
    return out


def by_resource(lines: list[str], to_span: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """A recorded start's OTLP JSON lines as one ResourceSpans per resource and one ScopeSpans per scope (as a
    trace store answers), each span rewritten by ``to_span`` into the store's encoding."""
    grouped: dict[str, dict[str, Any]] = {}
    for line in lines:
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            key = json.dumps(rs.get("resource", {}), sort_keys=True)
            entry = grouped.setdefault(key, {"resource": rs.get("resource", {}), "scopeSpans": {}})
            for ss in rs.get("scopeSpans", []):
                scope = ss.get("scope", {})
                entry["scopeSpans"].setdefault(json.dumps(scope, sort_keys=True), {"scope": scope, "spans": []})[
                    "spans"].extend(to_span(s) for s in ss.get("spans", []))
    return [{"resource": e["resource"], "scopeSpans": list(e["scopeSpans"].values())} for e in grouped.values()]


def convert(lines: list[str]) -> list[dict[str, Any]]:
    return by_resource(lines, span)


def main() -> int:
    src = sys.argv[1]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt", encoding="utf-8") as f:
        batches = convert(f.read().splitlines())
    for path, doc in ((sys.argv[2], {"trace": {"resourceSpans": batches}}),
                      *(((sys.argv[3], {"batches": batches}),) if len(sys.argv) > 3 else ())):
        out = gzip.open if path.endswith(".gz") else open
        with out(path, "wt", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
