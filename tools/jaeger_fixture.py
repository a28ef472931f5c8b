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

from tools.tempo_fixture import by_resource


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
    return {"result": {"resourceSpans": by_resource(lines, _pdata_span)}}


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
