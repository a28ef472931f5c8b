"""The waterfall picture: self-contained HTML (inline SVG, tooltips, no network) and PNG, one lane per
process, the causes in labels and tooltips, a CPU strip only when the resource summary is present; and the
HTML as a user sees it, screenshotted by headless Chromium (tests/e2e/bootstrap_report.sh installs it; without it the
screenshot test fails in CI and skips elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import pytest
from recorded import DEV, aot_off, dev

from support import ci
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import waterfall

SVG = "{http://www.w3.org/2000/svg}"


def _svg(st) -> ET.Element:
    html = waterfall.html(st)
    return ET.fromstring(html[html.index("<svg"):html.index("</svg>") + 6])


@pytest.mark.parametrize("name", DEV)
def test_html_is_self_contained_and_well_formed(name):
    html = waterfall.html(dev(name))
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    root = _svg(dev(name))
    assert root.tag == f"{SVG}svg"


def test_one_lane_per_process_and_causes_in_labels_and_tooltips():
    root = _svg(dev("compiled-cold"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    for lane in ("API server", "EngineCore", "worker 0"):
        assert lane in texts
    assert any(t and t.startswith("torch.compile 35.2 s · compile cache miss") for t in texts)
    titles = [t.text for t in root.iter(f"{SVG}title")]
    compile_tip = next(t for t in titles if t.startswith("torch.compile  [worker]"))
    assert "compile cache miss (15 C++ builds)" in compile_tip and "phase torch_compile: 35.2 s" in compile_tip
    assert any(t.startswith("Model architecture inspection") and "modelinfo cache miss" in t for t in titles)
    assert any(t and t.startswith("advice: put VLLM_CACHE_ROOT") for t in texts)
    assert "ready" in texts


def test_unexplained_time_is_drawn_and_failed_start_marked():
    st = dev("eager-warm")
    imports = [s for s in st.spans if s.name == "Imports" and s.attrs[sc.PROCESS_KIND] == "worker"][0]
    imports.end -= int(2e9)  # two seconds nothing covers
    titles = [t.text for t in _svg(st).iter(f"{SVG}title")]
    assert any(t.startswith("unexplained: 2.00 s") for t in titles)
    texts = [t.text for t in _svg(dev("bad-model")).iter(f"{SVG}text")]
    assert any(t and t.startswith("failed in Engine arguments: HFValidationError") for t in texts)


def test_cpu_strip_only_with_resource_attributes():
    st = dev("compiled-cold")  # recorded before the resource summary existed: no strip
    assert not any((t.text or "").startswith("CPU (max") for t in _svg(st).iter(f"{SVG}text"))
    real = aot_off("first")  # a real start with the resource summary: one strip per process
    root = _svg(real)
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert [t for t in texts if t.startswith("CPU (max")] == ["CPU (max 1.2 cores)", "CPU (max 1.9 cores)",
                                                              "CPU (max 1.0 cores)"]
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    tip = next(t for t in titles if t.startswith("torch.compile  [worker]"))
    assert "cores_avg: " in tip and "disk_read: " in tip
    labels = [t for t in texts if t.startswith("AsyncLLM init")]
    assert labels and "cores" not in labels[0]  # containers carry no resource label
    assert "AMD EPYC" in texts[1]


REPORT_BOOTSTRAP = "tests/e2e/bootstrap_report.sh"


def test_png_is_valid(tmp_path):
    PIL = ci.module("PIL.Image", install=f"the report extra (Pillow; {REPORT_BOOTSTRAP})")
    waterfall.write_png(dev("compiled-warm"), str(tmp_path / "w.png"))
    with PIL.open(tmp_path / "w.png") as img:
        img.verify()
    with PIL.open(tmp_path / "w.png") as img:
        assert img.format == "PNG" and img.size[0] == 2800 and img.size[1] > 500
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors and len(colors) > 20  # a drawing, not a blank page


def test_html_renders_in_headless_chromium(tmp_path):
    browser = ci.command("chromium", "chromium-browser", "google-chrome", install=REPORT_BOOTSTRAP)
    PIL = ci.module("PIL.Image", install=f"the report extra (Pillow; {REPORT_BOOTSTRAP})")
    page = tmp_path / "waterfall.html"
    waterfall.write_html(dev("compiled-cold"), str(page))
    shot = tmp_path / "shot.png"
    profile = tempfile.mkdtemp()
    try:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", f"--user-data-dir={profile}", "--window-size=1400,900",
                        f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120,
                       env={**os.environ, "HOME": profile})
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    with PIL.open(shot) as img:
        rgb = img.convert("RGB")
        assert rgb.size == (1400, 900)
        colors = {c for _, c in rgb.getcolors(maxcolors=1 << 20)}
    # the bars' fills are on screen: imports grey, config purple, compile orange, engine blue
    for fill in ("#b0bec5", "#ce93d8", "#ffb74d", "#90caf9"):
        assert tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5)) in colors, fill


@pytest.mark.parametrize(("value", "outcome"), [("true", pytest.fail.Exception), ("1", pytest.fail.Exception),
                                                 ("", pytest.skip.Exception), ("false", pytest.skip.Exception)])
def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(value, outcome, monkeypatch):
    """The picture test above cannot pass unseen: in CI (CI=true, .ci/run) a browser or Pillow that could not be
    installed fails it; only a developer's machine may skip it, saying what to install."""
    monkeypatch.setenv("CI", value)
    with pytest.raises(outcome, match="no-such-browser-vos"):
        ci.command("no-such-browser-vos", install=REPORT_BOOTSTRAP)
    with pytest.raises(outcome, match="no_such_module_vos"):
        ci.module("no_such_module_vos", install=REPORT_BOOTSTRAP)
