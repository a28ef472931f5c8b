"""Where a test run's time went: ``python -m support.run_summary JUNIT_XML [STEPS] [LEDGER]``.

`tests/run.sh` prints it last (before the failure digest): the wall time of each step it ran (bootstraps, ruff,
pytest; STEPS: ``name seconds`` lines), each test tier's share of pytest (the junit report's per-test time: setup,
call and teardown, so a shared start is charged to the first test that asked for it), and every real `vllm serve`
the tests made (LEDGER: support/harness.py writes a JSON line per start), by tier and the slowest ones."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

SLOWEST = 8  # starts listed by name


def tier_of(test: str) -> str:
    """``tests/e2e/test_x.py::t`` or the junit classname ``tests.e2e.test_x`` -> ``e2e``."""
    parts = test.replace("::", "/").replace(".", "/").split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "tests" else "other"


def tiers(junit: Path) -> dict[str, tuple[int, float]]:
    """tier -> (tests, seconds)."""
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for case in ET.parse(junit).iter("testcase"):
        t = out[tier_of(case.get("classname", ""))]
        t[0] += 1
        t[1] += float(case.get("time") or 0)
    return {k: (n, s) for k, (n, s) in sorted(out.items(), key=lambda kv: -kv[1][1])}


def starts(ledger: Path) -> list[dict]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def lines(junit: Path | None, steps: Path | None, ledger: Path | None) -> list[str]:
    out = ["where the time went:"]
    if steps is not None and steps.exists():
        for row in steps.read_text().splitlines():
            name, _, secs = row.rpartition(" ")
            out.append(f"  {name:34s} {float(secs) / 60:6.1f} min")
    if junit is not None and junit.exists():
        for tier, (n, secs) in tiers(junit).items():
            out.append(f"  pytest tests/{tier:27s} {secs / 60:6.1f} min  ({n} tests)")
    rows = starts(ledger) if ledger is not None else []
    if rows:
        by: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for r in rows:
            b = by[tier_of(r["test"])]
            b[0] += 1
            b[1] += r["wall_s"]
        total = sum(r["wall_s"] for r in rows)
        out.append(f"real vllm serve starts: {len(rows)}, {total / 60:.1f} min in all ("
                   + ", ".join(f"{t} {n} in {s / 60:.1f} min" for t, (n, s) in sorted(by.items())) + ")")
        for r in sorted(rows, key=lambda r: -r["wall_s"])[:SLOWEST]:
            ready = f"ready {r['ready_s']:.0f} s" if r["ready_s"] is not None else f"not ready (rc {r['returncode']})"
            out.append(f"  {r['wall_s']:6.0f} s  {r['name'][:40]:40s} {ready:22s} {r['test'][:70]}")
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) if a else None for a in argv[1:4]] + [None] * (4 - len(argv))
    try:
        print("\n".join(lines(*paths[:3])))
    except (OSError, ET.ParseError, ValueError, KeyError) as exc:  # a summary never fails the run
        print(f"run summary: {exc!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
