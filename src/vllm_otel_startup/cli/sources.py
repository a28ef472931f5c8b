"""Where recorded starts come from: local OTLP-JSON files (ours: one ExportTraceServiceRequest per line),
single OTLP-JSON exports, Tempo responses saved to a file or fetched by trace id, directories and globs.

A source names one start (``report``) or a set of starts (``compare``, ``predict``); every problem is one
``ReportError`` with a one-line message.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import jaeger, tempo
from vllm_otel_startup.cli.output import warn
from vllm_otel_startup.model import corpus
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import find_root
from vllm_otel_startup.model.redact import redact_url
from vllm_otel_startup.model.spanmodel import Span, parse_text
from vllm_otel_startup.model.start import Start
from vllm_otel_startup.settings import start_dir as default_dir

__all__ = ["STDIN", "TRACE_ID", "Start", "latest_file", "many", "one", "parse_text", "read_file", "side", "side_label",
           "starts_in"]

TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_PATTERN = re.compile(r"[*?\[]")


STDIN = "-"  # a SOURCE of "-": the start is read from standard input (plain or gzipped)


def _stdin_text() -> str:
    import sys

    data = sys.stdin.buffer.read()
    try:
        return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ReportError(f"<stdin>: cannot read ({exc.__class__.__name__}: {exc})") from None


def read_file(path: str) -> list[Span]:
    if path == STDIN:
        return parse_text(_stdin_text(), "<stdin>")
    return parse_text(corpus.read_text(path), path)


def starts_in(spans: list[Span], source: str) -> list[Start]:
    """The vLLM starts among these spans, oldest first (one per trace with a root span)."""
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out = []
    for group in by_trace.values():
        root = find_root(group)
        if root is not None:
            out.append(Start(group, source, root))
    if not out:
        raise ReportError(f"{source}: not a vLLM start (no '{sc.ROOT_SPAN}' root span)")
    return sorted(out, key=lambda st: st.root.start)


def latest_file(directory: str | None = None) -> str:
    d = directory or default_dir()
    files = corpus.files([d]) if os.path.isdir(d) else []
    if not files:
        how = ("record one with `opentelemetry-instrument vllm serve MODEL`: with no OTLP endpoint set, each start is "
               f"written to {default_dir()} (OTEL_PYTHON_VLLM_STARTUP_DIR moves it)")
        raise ReportError(f"no recorded start in {d}; {how}")
    return max(files, key=os.path.getmtime)


def one(source: str | None, *, tempo_url: str | None = None, trace_id: str | None = None,
        jaeger_url: str | None = None) -> Start:
    """The start a ``report`` SOURCE names: a file (default: the latest in the local directory), the latest
    file in a directory, a trace id (local file ``<id>.jsonl``, or Tempo with ``tempo_url``, Jaeger v2 with
    ``jaeger_url``), or a Tempo or Jaeger query URL."""
    if source and source.startswith(("http://", "https://")):
        shown = redact_url(source)  # the label printed and embedded in the HTML: no credentials
        return _pick(starts_in(tempo.fetch_url(source), shown), trace_id, shown)
    if source and TRACE_ID.match(source) and not os.path.exists(source):
        if jaeger_url:
            return _pick(starts_in(jaeger.fetch(jaeger_url, source), source), source.lower(), source)
        if tempo_url:
            return _pick(starts_in(tempo.fetch(tempo_url, source), source), source.lower(), source)
        local = os.path.join(default_dir(), f"{source.lower()}.jsonl")
        if not os.path.exists(local):
            raise ReportError(f"trace {source}: not in {default_dir()} (to fetch it from Tempo: --tempo URL; "
                              "from Jaeger: --jaeger URL)")
        source = local
    if source == STDIN:
        return _pick(starts_in(read_file(STDIN), "<stdin>"), trace_id, "<stdin>")
    path = source or latest_file()
    if os.path.isdir(path):
        path = latest_file(path)
    return _pick(starts_in(read_file(path), path), trace_id, path)


def _pick(starts: list[Start], trace_id: str | None, source: str) -> Start:
    if trace_id:
        for st in starts:
            if st.trace_id == trace_id.lower():
                return st
        raise ReportError(f"{source}: no start with trace id {trace_id}")
    return starts[-1]


def many(sources: list[str], *, ready_only: bool = False,
         warn: Callable[[str], None] | None = None) -> list[Start]:
    """The starts a set of SOURCEs names: files, directories (every ``*.jsonl`` below them) and globs.
    Unreadable files in a directory or glob are skipped with a warning; a named file must be good."""
    out: list[Start] = []
    for src in sources:
        if src.startswith(("http://", "https://")) or (TRACE_ID.match(src) and not os.path.exists(src)):
            out.append(one(src))
            continue
        if src == STDIN:  # every start on standard input
            out.extend(starts_in(read_file(STDIN), "<stdin>"))
            continue
        if os.path.isfile(src):
            out.extend(starts_in(read_file(src), src))
            continue
        if not os.path.isdir(src) and not _PATTERN.search(src):
            raise ReportError(f"{src}: no such file or directory")
        files = corpus.files([src])
        if not files:
            raise ReportError(f"{src}: no recorded start (*.jsonl) found")
        for path in files:
            try:
                out.extend(starts_in(read_file(path), path))
            except ReportError as exc:
                if warn:
                    warn(f"skipped {exc}")
    if ready_only:
        kept = [st for st in out if st.ready]
        if warn and len(kept) < len(out):
            warn(f"skipped {len(out) - len(kept)} start(s) that did not reach ready")
        out = kept
    if not out:
        raise ReportError(f"no usable start in {' '.join(sources)}")
    return out


def side(src: str, tempo: str | None, jaeger_url: str | None = None) -> list[Start]:
    """One side of ``compare``: a start (a file, URL or trace id) or the ready starts a directory or glob names."""
    if (tempo or jaeger_url) and TRACE_ID.match(src) and not os.path.exists(src):
        return [one(src, tempo_url=tempo, jaeger_url=jaeger_url)]
    if os.path.isfile(src) or src.startswith(("http://", "https://")) or TRACE_ID.match(src):
        return many([src])
    return many([src], ready_only=True, warn=warn)


def side_label(src: str, starts: list[Start]) -> str:
    src = redact_url(src)  # a Tempo URL's credentials stay out of the table and the picture
    return src if len(starts) == 1 else f"{src} ({len(starts)} starts)"
