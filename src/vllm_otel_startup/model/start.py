"""One recorded start: its spans linked into a tree once, and what every reader asks of it (facts, the
processes, the critical path, advice) computed once, on first use.

Building a ``Start`` links the spans it is given (sets ``children``): it owns them from then on. A caller
that must keep its spans untouched passes copies (``summary.render`` does).
"""

from __future__ import annotations

from functools import cached_property

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import critical_path
from vllm_otel_startup.model.advice import Advice, RuleFailure, advise, observe
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import Facts, Lane, facts, find_root, lanes, link
from vllm_otel_startup.model.spanmodel import Span


class Start:
    """The spans of one trace with a ``vLLM startup`` root, and where they were read from."""

    def __init__(self, spans: list[Span], source: str = "", root: Span | None = None) -> None:
        root = root if root is not None else find_root(spans)
        if root is None:
            raise ReportError(f"{source or 'spans'}: not a vLLM start (no '{sc.ROOT_SPAN}' root span)")
        link(spans, root)  # the one place a start's spans are linked
        self.spans, self.source, self.root = spans, source, root

    @property
    def trace_id(self) -> str:
        return self.root.trace_id

    @property
    def model(self) -> str:
        return self.facts.model

    @property
    def ready(self) -> bool:
        return self.root.attrs.get(sc.OUTCOME) == "ready"

    @cached_property
    def facts(self) -> Facts:
        return facts(self.root, self.spans)

    @cached_property
    def lanes(self) -> list[Lane]:
        return lanes(self.root, self.spans)

    @cached_property
    def critical_path(self) -> critical_path.CriticalPath:
        return critical_path.analyse(self.root, self.spans, self.lanes)

    @cached_property
    def _advised(self) -> tuple[list[Advice], list[RuleFailure]]:
        failures: list[RuleFailure] = []
        return advise(self.facts, self.spans, failures), failures

    @property
    def advice(self) -> list[Advice]:
        return self._advised[0]

    @property
    def advice_failures(self) -> list[RuleFailure]:
        """Advice rules that raised on this start (their advice is missing)."""
        return self._advised[1]

    @cached_property
    def observations(self) -> list[str]:
        return observe(self.facts, self.spans)
