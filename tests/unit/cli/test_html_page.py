"""cli/html_page.py: one self-contained page shape (inline style, no script, escaped title) and one way to write a
file, whose every failure is one ReportError."""

from __future__ import annotations

import pytest

from vllm_otel_startup.cli.html_page import page, write_text
from vllm_otel_startup.model.errors import ReportError


def test_a_page_is_a_complete_document_with_its_title_escaped():
    html = page("a <b> & c", "body{margin:0}", "<p>x</p>\n")
    assert html.startswith("<!doctype html>\n<html lang=\"en\">") and html.endswith("</body></html>\n")
    assert "<title>a &lt;b&gt; &amp; c</title>" in html and "<style>body{margin:0}</style>" in html
    assert "<p>x</p>" in html and "<script" not in html


def test_write_text_makes_the_folders_and_every_failure_is_a_report_error(tmp_path):
    path = tmp_path / "a" / "b" / "page.html"
    write_text(str(path), "é")
    assert path.read_text(encoding="utf-8") == "é"
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportError, match="cannot write"):
        write_text(str(tmp_path / "file" / "page.html"), "x")  # a file where a folder should be
