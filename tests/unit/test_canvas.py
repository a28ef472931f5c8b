"""canvas.py: the report pictures' drawing model. Text fits its room or is cut with an ellipsis; items draw by
layer, then in the order added; the SVG escapes text and carries hatching and tooltips; the PNG backend draws
the same scene at its scale, and without Pillow says what to install."""

from __future__ import annotations

import builtins
import xml.etree.ElementTree as ET

import pytest

from vllm_otel_startup.canvas import CHAR_EM, Line, Rect, Scene, Text, fit, text_width
from vllm_otel_startup.model.errors import ReportError

SVG = "{http://www.w3.org/2000/svg}"


def test_text_fits_its_room_or_is_cut_with_an_ellipsis_or_left_out():
    assert text_width("abcd", 10) == 4 * 10 * CHAR_EM
    assert fit("Load weights", 10, 1000) == "Load weights"
    short = fit("Load weights", 10, 50)  # room for 8 characters: 7 and the ellipsis
    assert short == "Load we…" and text_width(short, 10) <= 50
    assert fit("Load weights", 10, 20) == ""  # not even 4 characters


def test_items_draw_by_layer_then_in_the_order_added():
    scene = Scene(100, 50)
    mark, grid, back, mark2 = Rect(0, 0, 1, 1, "#f00"), Line(0, 0, 1, 1), Rect(0, 0, 100, 50, "#eee"), Text(1, 1, "x")
    scene.add(mark)
    scene.add(grid, layer=1)
    scene.add(back, layer=0)
    scene.add(mark2)
    assert scene.ordered() == [back, grid, mark, mark2]


def test_the_svg_is_well_formed_escapes_text_and_carries_hatching_and_tooltips():
    scene = Scene(200, 40)
    scene.add(Rect(10, 5, 0.1, 30, "#abc", hatch="#000", title="Load weights <1.0 s>", dash=True))
    scene.add(Text(20, 20, "a < b & c", bold=True))
    scene.add(Line(0, 39, 200, 39, dash=True))
    svg = scene.svg()
    root = ET.fromstring(svg)  # parses: everything escaped
    assert (root.get("width"), root.get("height")) == ("200", "40")
    assert root.find(f"{SVG}defs/{SVG}pattern").get("id") == "hatch0"
    assert "a &lt; b &amp; c" in svg and 'font-weight="bold"' in svg
    assert "Load weights &lt;1.0 s&gt;" in svg
    assert 'width="0.5"' in svg  # a bar too thin to see is drawn half a pixel wide
    assert 'stroke-dasharray="4,3"' in svg


def test_the_png_is_the_scene_at_its_scale(tmp_path):
    image = pytest.importorskip("PIL.Image")
    scene = Scene(120, 30, background="#ffffff")
    scene.add(Rect(0, 0, 60, 30, "#ff0000"))
    scene.add(Text(70, 15, "label"))
    path = tmp_path / "p.png"
    scene.png(str(path), scale=2.0)
    with image.open(path) as im:
        assert im.size == (240, 60)
        assert im.convert("RGB").getpixel((10, 10)) == (255, 0, 0)
        assert im.convert("RGB").getpixel((230, 5)) == (255, 255, 255)


def test_without_pillow_the_png_says_what_to_install(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    with pytest.raises(ReportError, match=r"needs Pillow: pip install 'vllm-otel-startup\[report\]'"):
        Scene(10, 10).png(str(tmp_path / "p.png"))
