"""Where starts come from: our OTLP JSON lines, gzip, a one-document OTLP export, Tempo's protobuf-JSON
responses (v1 ``batches``, v2 ``{"trace": ...}``), directories and globs; bad input is one clear error."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
from recorded import DATA, DEV, dev, dev_path

from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.spanmodel import parse_otlp


def _key(spans):
    return sorted((s.trace_id, s.span_id, s.parent_id, s.name, s.start, s.end, s.status,
                   tuple(sorted((k, str(v)) for k, v in s.attrs.items()))) for s in spans)


@pytest.mark.parametrize("name", DEV)
def test_each_recorded_start_reads_as_one_start(name):
    st = dev(name)
    assert st.root.name == "vLLM startup" and st.root.parent_id is None
    assert st.ready == (name != "bad-model")
    assert len({s.trace_id for s in st.spans}) == 1


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_tempo_protobuf_json_reads_like_the_original(version):
    original = dev("compiled-warm")
    tempo = sources.one(str(DATA / f"tempo-{version}-compiled-warm.json.gz"))
    assert _key(tempo.spans) == _key(original.spans)  # base64 ids, enum names and string ints decoded


def test_one_document_otlp_export_and_plain_files(tmp_path):
    with gzip.open(dev_path("eager-warm"), "rt") as f:
        lines = f.read().splitlines()
    merged = {"resourceSpans": [rs for ln in lines for rs in json.loads(ln)["resourceSpans"]]}
    (tmp_path / "export.json").write_text(json.dumps(merged, indent=2))
    (tmp_path / "plain.jsonl").write_text("\n".join(lines) + "\n")
    a = sources.one(str(tmp_path / "export.json"))
    b = sources.one(str(tmp_path / "plain.jsonl"))
    assert _key(a.spans) == _key(b.spans) == _key(dev("eager-warm").spans)


def test_directory_gives_its_newest_start_and_sets_every_start(tmp_path):
    for n, name in enumerate(("eager-cold", "eager-warm")):
        shutil.copy(dev_path(name), tmp_path / f"{name}.jsonl.gz")
        os.utime(tmp_path / f"{name}.jsonl.gz", (n, n))
    assert sources.one(str(tmp_path)).trace_id == dev("eager-warm").trace_id
    assert len(sources.many([str(tmp_path)])) == 2
    assert len(sources.many([str(tmp_path / "eager-*")])) == 2


def test_a_set_skips_an_unreadable_file_with_a_warning(tmp_path):
    shutil.copy(dev_path("eager-cold"), tmp_path / "good.jsonl.gz")
    (tmp_path / "broken.jsonl").write_text('{"resourceSpans": [\n')
    warned = []
    assert len(sources.many([str(tmp_path)], warn=warned.append)) == 1
    assert len(warned) == 1 and "broken.jsonl" in warned[0]


def test_ready_only_drops_failed_starts():
    warned = []
    got = sources.many([dev_path("bad-model"), dev_path("eager-cold")], ready_only=True, warn=warned.append)
    assert [s.ready for s in got] == [True] and "did not reach ready" in warned[0]


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), ("", "no spans"), ("not json\n", "not OTLP JSON"), ("[1, 2]", "not OTLP JSON"),
    ('{"resourceSpans": []}\n', "no spans"), ('{"batches": []}', "no spans"),
    ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AAAA","spanId":"AAAAAAAAAAA=","name":"x",'
     '"startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}', "not OTLP JSON"),
])
def test_bad_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "start.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportError, match=message):
        sources.one(str(path))


def test_spans_of_another_program_are_not_a_vllm_start(tmp_path):
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "GET /",
                                                         "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}
    (tmp_path / "x.json").write_text(json.dumps(doc))
    with pytest.raises(ReportError, match="not a vLLM start"):
        sources.one(str(tmp_path / "x.json"))


def test_unknown_trace_id_and_empty_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_DIR", str(tmp_path))
    with pytest.raises(ReportError, match="not in"):
        sources.one("ab" * 16)
    with pytest.raises(ReportError, match="no recorded start"):
        sources.one(None)
    with pytest.raises(ReportError, match="no recorded start"):
        sources.many([str(tmp_path)])


def test_protobuf_json_status_and_ids():
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "W47/95gDgQPSabYzgT/HAA==", "spanId": "7uGbfsPBsQA=", "parentSpanId": "", "name": "s",
        "kind": "SPAN_KIND_SERVER", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
        "attributes": [{"key": "n", "value": {"intValue": "7"}}, {"key": "b", "value": {"boolValue": True}}]}]}]}]}
    (s,) = parse_otlp(doc)
    assert s.trace_id == "5b8efff798038103d269b633813fc700" and s.span_id == "eee19b7ec3c1b100"  # Tempo's doc example
    assert s.parent_id is None and s.status == 2 and s.status_message == "boom" and s.attrs == {"n": 7, "b": True}
