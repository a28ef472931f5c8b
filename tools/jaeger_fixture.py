"""Convert a recorded start (our OTLP JSON lines) into what Jaeger v2's query service answers for it:
``GET /api/v3/traces/<id>`` -> ``{"result": {"resourceSpans": [...]}}``. The api_v3 HTTP gateway wraps the
collector's pdata ``TracesData`` (jaegertracing/jaeger, cmd/jaeger/internal/extension/jaegerquery/internal/apiv3:
``http_gateway.go`` ``returnTrace``, snapshot ``snapshots/GetTrace.json``), whose JSON is OTLP/HTTP JSON: hex ids,
integer enums (``"kind": 2``, ``"status": {"code": 2}``), 64-bit integers as strings, zero and empty fields left
out. The gateway concatenates the stored trace's ResourceSpans; here one per process, as each process exports
under its own resource.

    python -m tools.jaeger_fixture START.jsonl[.gz] OUT.json[.gz]

No Jaeger server installs here; tests/unit/cli/test_jaeger.py serves the file from a local http.server.
"""

from __future__ import annotations

import gzip
import json
import sys
from typing import Any


def _pdata_span(s: dict[str, Any]) -> dict[str, Any]:
    """A span as pdata's JSON marshaller writes it: zero values left out (no ``"status": {}``, no kind 0)."""
    out = {k: v for k, v in s.items() if v not in (None, "", [], {})}
    status = {k: v for k, v in (s.get("status") or {}).items() if v not in (0, "", None)}
    if status:
        out["status"] = status
    else:
        out.pop("status", None)
    if not out.get("kind"):
        out.pop("kind", None)
    return out


def convert(lines: list[str]) -> dict[str, Any]:
    by_resource: dict[str, dict[str, Any]] = {}
    for line in lines:
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            key = json.dumps(rs.get("resource", {}), sort_keys=True)
            entry = by_resource.setdefault(key, {"resource": rs.get("resource", {}), "scopeSpans": {}})
            for ss in rs.get("scopeSpans", []):
                scope = ss.get("scope", {})
                entry["scopeSpans"].setdefault(json.dumps(scope, sort_keys=True), {"scope": scope, "spans": []})[
                    "spans"].extend(_pdata_span(s) for s in ss.get("spans", []))
    spans = [{"resource": e["resource"], "scopeSpans": list(e["scopeSpans"].values())} for e in by_resource.values()]
    return {"result": {"resourceSpans": spans}}


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt", encoding="utf-8") as f:
        doc = convert(f.read().splitlines())
    out = gzip.open if dst.endswith(".gz") else open
    with out(dst, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
