"""The local startup file (OTLP JSON) and the report read back from it."""

from __future__ import annotations

import json
import os

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
from vllm_otel_startup.cli import report, sources
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start


def _record(directory, keep=20):
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    exporter = StartupFileExporter(str(directory), keep=keep)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t = provider.get_tracer("vllm_otel_startup")
    root = t.start_span(sc.ROOT_SPAN, start_time=0, attributes={sc.PHASE: "startup", sc.OUTCOME: "ready"})
    from opentelemetry import trace

    ctx = trace.set_span_in_context(root)
    t.start_span("Imports", context=ctx, start_time=0, attributes={sc.PHASE: "imports"}).end(end_time=6 * 10**9)
    t.start_span("Load weights", context=ctx, start_time=6 * 10**9,
                 attributes={sc.PHASE: "weights_load", sc.WEIGHTS_BYTES: 5}).end(end_time=9 * 10**9)
    t.start_span("request", context=ctx, start_time=1).end(end_time=2)  # not a startup span: not written
    root.end(end_time=10 * 10**9)
    provider.shutdown()
    return root.get_span_context().trace_id


def test_one_file_per_start_in_otlp_json(tmp_path):
    trace_id = _record(tmp_path)
    path = tmp_path / f"{trace_id:032x}.jsonl"
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    names = [s["name"] for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert sorted(names) == sorted([sc.ROOT_SPAN, "Imports", "Load weights"])
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_report_tree_and_explained_share(tmp_path, capsys):
    trace_id = _record(tmp_path)
    assert report.run(str(tmp_path / f"{trace_id:032x}.jsonl")) == 0
    out = capsys.readouterr().out
    assert "vLLM startup" in out and "Load weights" in out
    assert "critical path: 90.0% of 10.00 s explained" in out  # 9 of 10 s covered, the last second is a named gap
    st = Start(sources.read_file(str(tmp_path / f"{trace_id:032x}.jsonl")))
    share, gap, at = report.coverage(st.root, st.spans)
    assert share == pytest.approx(0.9) and gap == 10**9 and at == 9 * 10**9


def test_old_files_are_pruned(tmp_path):
    for i in range(4):
        (tmp_path / f"{i:032x}.jsonl").write_text("{}\n")
        os.utime(tmp_path / f"{i:032x}.jsonl", (i, i))
    _record(tmp_path, keep=2)
    assert len(list(tmp_path.glob("*.jsonl"))) == 2


def test_unwritable_directory_costs_one_warning_not_the_start(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _record(blocker / "sub")  # a path under a regular file cannot be created
    assert sum("cannot write startup trace" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), ("", "no spans"), ("not json\n", "not OTLP JSON"),
    ('{"resourceSpans": []}\n', "no spans"),
])
def test_report_bad_input_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "start.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportError, match=message):
        sources.read_file(str(path))


def test_report_rejects_a_trace_that_is_not_a_vllm_start():
    span = Span("t", "s", None, "GET /", 0, 1, {}, {})
    with pytest.raises(ReportError, match="not a vLLM start"):
        Start([span])
