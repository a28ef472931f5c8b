"""cli/phase_tree.py: one start's whole tree as text (each span with its duration, share of the start, process
kind and causes; waiting spans said to be; a child process nested where it ran), then the critical path, the
covered share and the advice. On a real recorded start (tests/data/starts/dev)."""

from __future__ import annotations

from recorded import dev

from vllm_otel_startup.cli.phase_tree import coverage, leaves, render


def test_the_tree_nests_each_process_where_it_ran_with_duration_share_kind_and_causes():
    st = dev("eager-cold")
    lines = render(st).splitlines()
    assert lines[0].split() == [f"{st.root.duration:.3f}s", "100.0%", "vLLM", "startup", "[api_server]"]
    at: dict[str, str] = {}  # each name's first line
    for ln in lines:
        if "%" in ln and "  [" in ln:
            at.setdefault(ln.split("%", 1)[1].split("  [")[0].strip(), ln)
    indent = {name: len(ln.split("%", 1)[1]) - len(ln.split("%", 1)[1].lstrip()) for name, ln in at.items()}
    assert indent["EngineCore process"] < indent["Worker process"] < indent["Load weights"]
    assert at["Worker process"].rstrip().endswith("[worker]")
    assert "(modelinfo cache miss)" in at["Model architecture inspection"]
    assert "(waiting)" in at["Worker wait ready"]


def test_after_the_tree_come_the_coverage_and_the_advice():
    st = dev("eager-cold")
    text = render(st)
    share, gap, _ = coverage(st.root, st.spans)
    assert f"(any leaf span, waiting spans included: {100 * share:.1f}%, largest gap {gap / 1e9:.3f} s)" in text
    assert f"advice ({len(st.advice)}):" in text and len(st.advice) >= 1


def test_coverage_is_the_leaves_share_of_the_start_and_the_largest_gap_lies_inside_it():
    st = dev("eager-cold")
    share, gap, gap_at = coverage(st.root, st.spans)
    assert 0.9 < share <= 1.0
    assert 0 < gap < st.root.end - st.root.start and st.root.start <= gap_at < st.root.end
    found = leaves(st.root, st.spans)
    assert found and all(st.root.start <= a <= b for a, b, _ in found)
    assert st.root.name not in {name for _, _, name in found}  # never the root itself
