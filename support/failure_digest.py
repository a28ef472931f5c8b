"""The failures of a pytest run, last and short: ``python -m support.failure_digest JUNIT_XML``.

`tests/run.sh` prints it after pytest, so that a CI log cut to its tail still says why each test failed (with
``-rA`` the tail is otherwise the passed tests' captured output)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

LINES = 12  # of each failure's message and traceback end: the assertion and its values


def digest(path: str) -> list[str]:
    out: list[str] = []
    for case in ET.parse(path).iter("testcase"):
        for kind in ("failure", "error"):
            for bad in case.findall(kind):
                test = f"{case.get('classname', '')}::{case.get('name', '')}"
                text = (bad.text or bad.get("message") or "").rstrip().splitlines()
                out.append(f"--- {kind}: {test}")
                out.extend(f"    {line[:300]}" for line in text[-LINES:])
    return out


def main(argv: list[str]) -> int:
    try:
        lines = digest(argv[1])
    except (IndexError, OSError, ET.ParseError) as exc:
        print(f"failure digest: no pytest report ({exc})")
        return 0
    print(f"failure digest: {sum(1 for x in lines if x.startswith('--- '))} failed or errored tests")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
