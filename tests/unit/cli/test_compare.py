"""compare: cold vs warm shows the compile-cache hit and its saving, phase by phase; sets compare by median;
different models are refused; the picture files are produced and valid."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from recorded import DATA, dev, named

from support import ci
from vllm_otel_startup.cli import compare, sources
from vllm_otel_startup.model.errors import ReportError


def _cmp(a: str, b: str):
    return compare.compare([dev(a)], [dev(b)], a_label=a, b_label=b)


def test_cold_vs_warm_compiled_shows_the_compile_hit_and_its_saving():
    c = _cmp("compiled-cold", "compiled-warm")
    cold, warm = named(dev("compiled-cold"), "torch.compile"), named(dev("compiled-warm"), "torch.compile")
    saving = cold.duration - warm.duration
    heads = compare.headlines(c)
    assert heads[0].startswith("torch.compile [worker]: compile cache miss → hit, C++ builds 15 → 0, -")
    assert heads[0].endswith(f"-{compare.seconds(saving)}")
    assert any(h.startswith("Model architecture inspection [API server]: modelinfo cache miss → hit") for h in heads)
    assert any(h.startswith("AOT cache load [worker]: AOT artifact none yet → load failed, +") for h in heads)
    assert heads[-1].startswith("start: cache root cold → warm")
    row = next(r for r in c.rows if r.key == ("worker", "torch_compile"))
    assert row.delta == pytest.approx(-saving)
    total = next(r for r in c.rows if r.key == ("api_server", "startup"))
    assert total.delta == pytest.approx(dev("compiled-warm").root.duration - dev("compiled-cold").root.duration)


def test_table_lists_phases_in_tree_order_with_deltas():
    text = compare.table(_cmp("eager-cold", "eager-warm"))
    lines = text.splitlines()
    assert "changed causes:" in lines
    body = lines[lines.index("") + 1:]
    assert body[0].split()[:2] == ["phase", "process"]
    assert body[1].startswith("vLLM startup")
    names = [ln[:52].strip() for ln in body[1:]]
    assert names.index("Imports") < names.index("Config resolution") < names.index("AsyncLLM init")
    row = next(ln for ln in body if ln.strip().startswith("Model architecture inspection"))
    assert "modelinfo cache miss → hit" in row and re.search(r"-10\.3 s\s+-100%", row)


def test_sets_compare_medians(tmp_path):
    c = compare.compare([dev("compiled-cold"), dev("eager-cold")], [dev("compiled-warm"), dev("eager-warm")])
    total = next(r for r in c.rows if r.key == ("api_server", "startup"))
    cold = sorted(dev(n).root.duration for n in ("compiled-cold", "eager-cold"))
    assert total.a == pytest.approx(sum(cold) / 2)
    assert "median" in compare.table(c)


def test_different_models_are_refused_unless_allowed():
    other = sources.one(str(DATA / "corpus" / "l8-h256-eager-cold.jsonl.gz"))
    with pytest.raises(ReportError, match="different models"):
        compare.compare([dev("eager-cold")], [other])
    with pytest.raises(ReportError, match="A holds starts of 2 models"):
        compare.compare([dev("eager-cold"), other], [dev("eager-warm")])
    assert compare.compare([dev("eager-cold")], [other], allow_different_models=True).rows


def test_a_failed_start_compares_by_what_it_did():
    c = compare.compare([dev("bad-model")], [dev("eager-cold")], allow_different_models=True)
    imports = next(r for r in c.rows if r.key == ("api_server", "imports"))
    assert imports.a and imports.b
    assert next(r for r in c.rows if r.key == ("worker", "imports")).a is None


def test_pictures_are_valid(tmp_path):
    PIL = ci.module("PIL.Image", install="the report extra (Pillow; tests/e2e/bootstrap_report.sh)")
    c = _cmp("compiled-cold", "compiled-warm")
    compare.write_png(c, str(tmp_path / "c.png"))
    compare.write_html(c, str(tmp_path / "c.html"))
    with PIL.open(tmp_path / "c.png") as img:
        img.verify()
    with PIL.open(tmp_path / "c.png") as img:
        assert img.size[0] == 2800 and img.size[1] > 600
    html = (tmp_path / "c.html").read_text()
    svg = html[html.index("<svg"):html.index("</svg>") + 6]
    root = ET.fromstring(svg)
    texts = "".join(root.itertext())
    assert "compile cache miss → hit" in texts and "A: compiled-cold" in texts
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
