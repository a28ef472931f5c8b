"""The vocabulary is one contract: the table, the semantic-convention module and the telemetry reference
(docs/telemetry.md, metrics.md, configuration.md, patch-points.md) agree."""

from __future__ import annotations

from pathlib import Path

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import causes
from vllm_otel_startup.agent.foundation.patch_points import (
    HOOKS,
    NATIVE_SPANS,
    PATCH_POINTS,
    SPAN_PHASES,
    WAITING_SPANS,
)

DOCS = Path(__file__).resolve().parents[3] / "docs"
TRACE = (DOCS / "telemetry.md").read_text()  # the trace: phases, span names, attributes
PATCH_POINTS_DOC = (DOCS / "patch-points.md").read_text()
# an attribute or metric name may be on any reference page (a span's resource summary sits with the metrics)
REFERENCE = "\n".join((DOCS / page).read_text()
                      for page in ("telemetry.md", "metrics.md", "configuration.md", "patch-points.md"))


def test_every_row_is_well_formed():
    for p in PATCH_POINTS:
        assert ":" in p.target and p.hook in HOOKS, p
        assert p.phase in sc.PHASES, p
        assert p.probe is None or p.probe in causes.CALL_PROBE_NAMES, p
        assert (p.hook == "ready") == (p.ends is not None), p  # each ready row names the process it ends
        if p.native_since:
            assert NATIVE_SPANS.get(p.span) == p.phase, p  # our fallback uses vLLM's own name
    assert len({p.key for p in PATCH_POINTS}) == len(PATCH_POINTS)  # a target has one row, or one more `since` row


def test_the_waiting_phases_are_the_tables_waiting_rows():
    """semconv's waiting phases (the dashboards' stuck-in-phase alerts leave them out) are the table's waiting rows
    and the launcher's wait on its API servers."""
    waiting = {SPAN_PHASES[name] for name in WAITING_SPANS}
    assert waiting == set(sc.WAITING_PHASES)


def test_every_span_name_maps_to_one_documented_phase():
    for name, phase in SPAN_PHASES.items():
        assert phase in sc.PHASES, name
        assert f"`{name}`" in TRACE, f"span name {name!r} not documented"
    for phase in sc.PHASES:
        assert f"`{phase}`" in TRACE, f"phase {phase!r} not documented"


def test_every_attribute_is_documented():
    names = [v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and "." in v and " " not in v]
    assert names
    for name in names:
        assert f"`{name}`" in REFERENCE, f"attribute {name!r} not documented"


def test_every_patch_target_is_documented():
    for p in PATCH_POINTS:
        assert f"`{p.target}`" in PATCH_POINTS_DOC, p.target


def test_generated_tables_in_the_doc_match_the_code():
    from tools import gen_docs

    stale = [page for page in sorted(set(gen_docs.PAGES.values()))
             if gen_docs.render((DOCS / page).read_text(), page) != (DOCS / page).read_text()]
    assert stale == [], f"docs/{stale} out of date: run python -m tools.gen_docs"
