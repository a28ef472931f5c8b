"""src/ says why, not what one day measured: no GPU model a figure was taken on, no issue number, no date in the
package's code or comments (the figures live in docs/results.md, the issues in the tracker)."""

from __future__ import annotations

import re
from pathlib import Path

import vllm_otel_startup

PACKAGE = Path(vllm_otel_startup.__file__).resolve().parent
DATED = re.compile(r"\bH[12]00\b|\bissues? ?#?\d+|\b20\d\d-[01]\d-[0-3]\d\b", re.IGNORECASE)


def _findings(root: Path) -> list[str]:
    return [f"{p.relative_to(root.parent)}:{n}: {line.strip()}"
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if DATED.search(line)]


def test_no_measurement_host_issue_number_or_date_in_src():
    assert list(PACKAGE.rglob("*.py"))
    assert _findings(PACKAGE) == []


def test_the_check_finds_what_it_forbids(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("X = 1  # 0.4 s on an H100 (issue 25)\nY = 2  # why, not when\n")
    (pkg / "b.py").write_text('"""measured 2026-11-27 on the h200 host."""\n')
    (pkg / "c.py").write_text("cpython_issue = 'cpython#142183'  # an upstream bug's number is a reference\n")
    assert [f.split(": ")[0] for f in _findings(pkg)] == ["pkg/a.py:1", "pkg/b.py:1"]
