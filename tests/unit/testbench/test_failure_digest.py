"""tests/run.sh ends a failed run with each failure's reason (support/failure_digest.py): a real pytest run's
JUnit report in, the failing test and its assertion out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import failure_digest


def test_the_digest_names_each_failure_with_its_assertion(tmp_path: Path):
    (tmp_path / "test_sample.py").write_text(
        "def test_ok():\n    assert True\n\n"
        "def test_bad():\n    value = 41\n    assert value == 42, 'the answer'\n")
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                    str(tmp_path / "test_sample.py")], cwd=tmp_path, capture_output=True)
    lines = failure_digest.digest(str(junit))
    assert lines[0] == "--- failure: test_sample::test_bad"
    assert any("AssertionError: the answer" in line for line in lines[1:]), lines
    assert any("assert 41 == 42" in line for line in lines[1:]), lines
    assert not any("test_ok" in line for line in lines)


def test_no_report_is_said_not_raised(tmp_path: Path, capsys):
    assert failure_digest.main(["failure_digest", str(tmp_path / "absent.xml")]) == 0
    assert "no pytest report" in capsys.readouterr().out
