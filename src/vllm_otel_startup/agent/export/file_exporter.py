"""Local startup-trace files: OTLP JSON, one file per start, written by every process of that start.

Default directory ``~/.cache/vllm-otel-startup/starts`` (``OTEL_PYTHON_VLLM_STARTUP_DIR``); the newest
``OTEL_PYTHON_VLLM_STARTUP_KEEP`` (default 20) files are kept. Only startup spans (those with a
``vllm.startup.phase``) are written, scrubbed by the span processor before they ended; the resource is scrubbed
here (``model/redact.py``). A full disk or read-only directory costs one warning, never the start.
The directory is created owner-only; one that belongs to another user is refused with one warning
(private_dir.py). An export (one per phase end: the export is started as soon as a phase ends) is one appended
line: the directory is checked once, not at every export.

Ours, not the OTLP JSON file exporter package of the same release line (``opentelemetry-exporter-otlp-json-file``):
that one writes the same spans (benchmarks/file_exporter.py reads both back) but to one fixed file, not one per
start, with no lock between the processes that append, and with the resource unscrubbed (an ``--api-key`` in
``process.command_args`` is written); its encoder also costs about twice ours on a start's batch of spans.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export import private_dir
from vllm_otel_startup.model.spanmodel import encode

_log = logging.getLogger("vllm_otel_startup")


def default_dir() -> str:
    return settings.start_dir()


class StartupFileExporter(SpanExporter):
    def __init__(self, directory: str | None = None, keep: int | None = None) -> None:
        self.directory = directory or default_dir()
        self.keep = keep if keep is not None else int(settings.number(settings.KEEP, minimum=1))
        self._warned = False
        self._pruned = False
        self._checked = False  # the directory exists and is ours (checked at the first export)

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        by_trace: dict[int, list[Any]] = {}
        for s in spans:
            if s.attributes and sc.PHASE in s.attributes:
                by_trace.setdefault(s.context.trace_id, []).append(s)
        if not by_trace:
            return SpanExportResult.SUCCESS
        if not self._checked and not self._check():
            return SpanExportResult.FAILURE
        try:
            for trace_id, group in by_trace.items():
                self._append(f"{trace_id:032x}.jsonl", json.dumps(encode(group), separators=(",", ":")) + "\n")
            if not self._pruned:
                self._pruned = True
                self._prune()
            return SpanExportResult.SUCCESS
        except OSError as exc:
            if not self._warned:
                self._warned = True
                _log.warning("vllm-otel-startup: cannot write startup trace to %s (%s)", self.directory, exc)
            return SpanExportResult.FAILURE

    def _check(self) -> bool:
        why = private_dir.prepare(self.directory)
        self._checked = why is None
        if why is not None and not self._warned:
            self._warned = True
            _log.warning("vllm-otel-startup: cannot write startup trace to %s (%s; set %s to a directory of your own)",
                         self.directory, why, settings.DIR.name)
        return self._checked

    def _append(self, name: str, line: str) -> None:
        path = os.path.join(self.directory, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:  # the directory went away since it was checked: once more, from the check
            if not self._check():
                raise
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            _locked_write(fd, line.encode())
        finally:
            os.close(fd)

    def _prune(self) -> None:
        try:
            files = [os.path.join(self.directory, f) for f in os.listdir(self.directory) if f.endswith(".jsonl")]
            files.sort(key=os.path.getmtime, reverse=True)
            for old in files[max(self.keep, 1):]:
                os.unlink(old)
        except OSError:
            pass

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _locked_write(fd: int, data: bytes) -> None:
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        pass
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
