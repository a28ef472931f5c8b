"""The report side on live instrumented starts (the session's real `vllm serve` runs): the printed breakdown
matches the trace, compare of cold vs warm shows the compile hit and its saving, advice fires on the start
planted with a fresh cache root and stays silent on the warm one, and the pictures are produced and valid."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support import ci
from vllm_otel_startup.cli import compare, sources, waterfall
from vllm_otel_startup.model import summary
from vllm_otel_startup.model.advice import advise
from vllm_otel_startup.model.facts import facts, link, seconds

pytestmark = pytest.mark.e2e
ROW = re.compile(r"^\s*(\S+ s)\s+(\d+)%\s\s(API server|EngineCore|worker(?: \d+)?)\s+(\S.*?)(?:  \((.*))?$")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _start(obs) -> sources.Start:
    return sources.one(str(obs.start.trace_file_dir / f"{obs.root.trace_id}.jsonl"))


def _rules(st) -> list[str]:
    return [a.rule for a in advise(facts(link(st.spans), st.spans), st.spans)]


@pytest.mark.parametrize("which", ["eager", "compiled_cold", "compiled_warm"])
def test_printed_breakdown_matches_the_trace(which, request):
    st = _start(request.getfixturevalue(which))
    text = summary.render(st.spans)
    assert text.startswith(f"vLLM startup: ready in {seconds(st.root.duration)}")
    rows = [m.groups() for line in text.splitlines() if (m := ROW.match(line))]
    assert len(rows) >= 8, text
    for dur, share, _proc, names, _ in rows:
        head = names.split(" > ")[0].strip()
        match = [s for s in st.spans if s.name == head and seconds(s.duration) == dur]
        assert match, f"{names} {dur} not in the trace"
        assert int(share) == round(100 * match[0].duration / st.root.duration)


def test_compare_cold_vs_warm_shows_the_compile_hit_and_its_saving(compiled_cold, compiled_warm):
    cold, warm = _start(compiled_cold), _start(compiled_warm)
    c = compare.compare([cold], [warm])
    row = next(r for r in c.rows if r.key == ("worker", "torch_compile"))
    assert row.causes_a["compile cache"] == "miss" and row.causes_b["compile cache"] == "hit"
    assert row.delta < -5  # the hit saves seconds of compilation even on this tiny model
    # among the headlines, ranked by saving (the modelinfo cache's miss -> hit can save as much on this tiny model)
    assert any(h.startswith("torch.compile [worker]: compile cache miss → hit") for h in compare.headlines(c)[:2]), \
        compare.headlines(c)
    p = subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", "compare", cold.source, warm.source],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0 and "compile cache miss → hit" in p.stdout, p.stderr


def test_advice_fires_on_a_fresh_cache_root_and_stays_silent_when_warm(compiled_cold, compiled_warm):
    assert "fresh_cache_root" in _rules(_start(compiled_cold))
    warm = _rules(_start(compiled_warm))
    assert "fresh_cache_root" not in warm and "compile_key_changed" not in warm


def test_pictures_are_produced_and_valid(compiled_cold, tmp_path):
    st = _start(compiled_cold)
    waterfall.write_html(st, str(tmp_path / "w.html"))
    html = (tmp_path / "w.html").read_text()
    svg = ET.fromstring(html[html.index("<svg"):html.index("</svg>") + 6])
    assert any((t.text or "").startswith("torch.compile") for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    pil = ci.module("PIL.Image", install="the report extra (Pillow; tests/e2e/bootstrap_report.sh)")
    waterfall.write_png(st, str(tmp_path / "w.png"))
    with pil.open(tmp_path / "w.png") as img:
        img.verify()


def test_failed_start_report(bad_model):
    st = _start(bad_model)
    assert summary.render(st.spans).startswith("vLLM startup: FAILED after")
    assert _rules(st) == []
    p = subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", "report", st.source], capture_output=True,
                       text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 1 and "Traceback" not in p.stderr
