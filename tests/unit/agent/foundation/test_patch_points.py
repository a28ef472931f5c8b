"""The patch table against the qualname inventory of real released wheels (tests/data/vllm-qualnames-by-release.txt,
written by tools/qualname_inventory.py): every row's version range holds only releases that define its target,
native_since is the first release whose source decorates the target with vLLM's @instrument, and every vLLM target
of the table has an inventory line (a new row means: re-run the script)."""

from __future__ import annotations

import re
from pathlib import Path

import fake_vllm
import pytest
from packaging.version import Version

from vllm_otel_startup.agent.foundation.patch_points import NATIVE_SPANS, PATCH_POINTS
from vllm_otel_startup.agent.patching.hooks import in_range

ROOT = Path(__file__).resolve().parents[4]
INVENTORY = fake_vllm.QUALNAMES
VLLM_ROWS = [p for p in PATCH_POINTS if p.module.startswith("vllm.")]


def parse() -> tuple[list[str], dict[str, dict[str, str]]]:
    """(releases in file order, target -> release -> cell)."""
    cells = fake_vllm.inventory()
    return list(next(iter(cells.values()))), cells


RELEASES, CELLS = parse()


def present(cell: str) -> bool:
    return cell.startswith("L")


def test_the_inventory_covers_the_compat_releases_and_every_release_has_every_target_line():
    for release in ("0.10.1", "0.15.1", "0.20.2", "0.26.0", "0.32.0", "0.33.0"):
        assert release in RELEASES
    assert all(list(row) == RELEASES for row in CELLS.values())
    assert "tools/qualname_inventory.py" in INVENTORY.read_text().split("\n", 3)[1]


def test_every_vllm_target_of_the_patch_table_has_an_inventory_line():
    from tools import qualname_inventory

    missing = [t for t in qualname_inventory.targets() if t not in CELLS]
    assert not missing, f"re-run python -m tools.qualname_inventory: no inventory line for {missing}"
    assert {p.target for p in VLLM_ROWS} <= set(CELLS)


@pytest.mark.parametrize("row", VLLM_ROWS, ids=lambda p: p.target)
def test_a_rows_range_holds_only_releases_that_define_its_target(row):
    cells = CELLS[row.target]
    lacking = [r for r in RELEASES if in_range(row.versions, r) and not present(cells[r])]
    assert not lacking, f"{row.target} ({row.versions}) is not defined in {lacking}: {[cells[r] for r in lacking]}"


@pytest.mark.parametrize("row", VLLM_ROWS, ids=lambda p: p.target)
def test_native_since_is_the_first_release_that_traces_the_target(row):
    cells = CELLS[row.target]
    traced = [r for r in RELEASES if in_range(row.versions, r) and "instrument(span_name=" in cells[r]]
    if row.native_since is None:
        assert not traced, f"vLLM traces {row.target} itself from {traced[:1]}: the row needs native_since"
        return
    assert traced, f"{row.target}: native_since {row.native_since}, but no scanned release traces it"
    first_in_range = next(r for r in RELEASES if in_range(row.versions, r))
    assert Version(traced[0]) == max(Version(row.native_since), Version(first_in_range))
    assert traced == [r for r in RELEASES if in_range(row.versions, r) and Version(r) >= Version(traced[0])], \
        "once traced, every later release traces it"
    names = {re.search(r"instrument\(span_name='([^']*)'\)", cells[r]).group(1) for r in traced}
    assert names == {row.span}, f"vLLM's span name {names} is not the row's {row.span!r}"
    assert row.span in NATIVE_SPANS


def test_the_fake_trees_keep_vllms_tracing_package_where_the_release_has_it():
    assert fake_vllm.tracing_package("0.15.1") is None  # no native tracing before 0.16
    assert fake_vllm.tracing_package("0.16.0") == fake_vllm.OLD_TRACING
    assert fake_vllm.tracing_package("0.33.0") == fake_vllm.OLD_TRACING  # the newest wheel: not moved yet
    tree = fake_vllm.release_tree("0.32.0")
    assert ("DefaultModelLoader.load_weights", "Load weights") in tree[
        "vllm.model_executor.model_loader.default_loader"]
    assert not [m for m in tree if m.startswith("vllm.tracing")]
