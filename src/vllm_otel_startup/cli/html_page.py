"""Self-contained HTML pages (the waterfall, compare): one page shape and one way to write a file."""

from __future__ import annotations

import os
from html import escape

from vllm_otel_startup.model.errors import ReportError


def page(title: str, style: str, body: str) -> str:
    """A complete HTML document: inline style, no script, no network."""
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{style}</style></head><body>\n{body}</body></html>\n")


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (parent directories created); any failure is one ReportError."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write ({exc})") from None
