"""A real start as the trace store saw it (shared by tests/e2e/conftest.py's fixtures and the test modules that
make starts of their own). A module of its own, not conftest: in a run that collects several test directories,
``import conftest`` finds whichever conftest was loaded first."""

from __future__ import annotations

import json

from support import harness
from vllm_otel_startup.model.spanmodel import Span, parse_otlp


class Observed:
    """A start as the backends saw it."""

    def __init__(self, start: harness.Start, spans: list[harness.Span]) -> None:
        self.start = start
        self.spans = spans
        roots = [s for s in spans if s.name == "vLLM startup"]
        assert len(roots) == 1, f"expected one root, got {len(roots)}"
        self.root = roots[0]

    def named(self, name: str) -> list[harness.Span]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> harness.Span:
        found = self.named(name)
        assert len(found) == 1, f"{name}: {len(found)} spans"
        return found[0]

    def file_docs(self) -> list[dict]:
        return file_docs(self.start, self.root.trace_id)

    def file_spans(self) -> list[Span]:
        return [s for d in self.file_docs() for s in parse_otlp(d)]


def file_docs(start: harness.Start, trace_id: str) -> list[dict]:
    path = start.trace_file_dir / f"{trace_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def observe(backends, start: harness.Start) -> Observed:
    """What Phoenix holds for this start, once it holds as many spans as the start's local file."""
    first = backends.trace_of_root(start.pid)
    written = sum(len(parse_otlp(d)) for d in file_docs(start, first[0].trace_id))
    return Observed(start, backends.trace_of_root(start.pid, expect=written))
