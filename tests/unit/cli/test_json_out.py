"""`--json` on every command: one document on stdout, valid against its versioned JSON Schema (docs/schemas/), the
same figures the text prints; SOURCE "-" reads the start from standard input (plain or gzipped)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.start import Start

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "docs" / "schemas"
DEV = REPO / "tests" / "data" / "starts" / "dev"
GPU = REPO / "tests" / "data" / "starts" / "gpu"
CORPUS = REPO / "tests" / "data" / "starts" / "corpus"


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", *args], input=stdin, capture_output=True,
                          timeout=120, cwd=REPO)


def valid(command: str, out: bytes) -> dict:
    doc = json.loads(out)  # the whole of stdout is one document
    schema = json.loads((SCHEMAS / f"{command}.v1.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    assert doc["schema"] == f"vllm-otel-startup/{command}/v1"
    return doc


@pytest.mark.parametrize("path", [DEV / "compiled-cold.jsonl.gz", GPU / "h100x2-llama8b-dp2-cold.jsonl.gz",
                                  DEV / "bad-model.jsonl.gz"], ids=["cpu-compiled", "gpu-dp2", "failed"])
def test_report_json_is_the_whole_start(path, tmp_path):
    p = cli("report", str(path), "--json", "--html", str(tmp_path / "w.html"))
    doc = valid("report", p.stdout)
    st = Start(sources.read_file(str(path)))
    assert p.returncode == (0 if st.ready else 1)
    assert doc["trace_id"] == st.trace_id and doc["outcome"] == st.facts.outcome
    assert len(doc["spans"]) == len(st.spans) and doc["spans"][0]["name"] == "vLLM startup"
    assert doc["critical_path"]["share"] == pytest.approx(st.critical_path.share)
    assert [a["rule"] for a in doc["advice"]] == [a.rule for a in st.advice]
    assert b"waterfall:" in p.stderr and (tmp_path / "w.html").exists()  # notes on stderr, stdout stays JSON


def test_the_data_parallel_report_names_its_slowest_engine_in_json():
    doc = valid("report", cli("report", str(GPU / "h100x2-llama8b-dp2-cold.jsonl.gz"), "--json").stdout)
    texts = [s["text"] for s in doc["critical_path"]["stragglers"]]
    assert any(t.startswith("slowest of 2: EngineCore") for t in texts), texts


def test_advise_json_and_stdin():
    raw = (DEV / "compiled-cold.jsonl.gz").read_bytes()
    for data in (raw, gzip.decompress(raw)):  # gzipped or plain on stdin
        p = cli("advise", "-", "--json", stdin=data)
        assert p.returncode == 0, p.stderr
        doc = valid("advise", p.stdout)
        assert doc["source"] == "<stdin>" and [a["rule"] for a in doc["advice"]] == ["fresh_cache_root"]
        assert doc["advice"][0]["saving_s"] > 0


def test_compare_json_rows_and_changed_causes():
    cold = (DEV / "eager-cold.jsonl.gz").read_bytes()
    p = cli("compare", "-", str(DEV / "eager-warm.jsonl.gz"), "--json", stdin=cold)
    assert p.returncode == 0, p.stderr
    doc = valid("compare", p.stdout)
    assert doc["a"]["label"] == "-" and doc["aggregate"] == "single"
    total = next(r for r in doc["rows"] if r["phase"] == "startup")
    assert total["delta_s"] == pytest.approx(total["b_s"] - total["a_s"]) and total["delta_s"] < 0
    assert any("cache root cold" in c for c in doc["changed_causes"])
    both = cli("compare", "-", "-", "--json", stdin=b"")
    assert both.returncode == 2 and b"only one side" in both.stderr


def test_predict_json_has_every_group_and_the_largest_residual():
    p = cli("predict", str(DEV / "compiled-warm.jsonl.gz"), "--corpus", str(CORPUS), "--json")
    assert p.returncode == 0, p.stderr
    doc = valid("predict", p.stdout)
    groups = [g["group"] for g in doc["groups"]]
    assert groups[-1] == "total" and "compile" in groups
    assert doc["fitted_on"] >= 20 and doc["largest_residual"]["group"] in groups
    assert b"fitted on" in p.stderr
    assert cli("predict", "--corpus", str(CORPUS), "--validate", "--json").returncode == 2
