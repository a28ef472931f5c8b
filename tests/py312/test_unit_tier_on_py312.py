"""The unit tier once more on CPython >= 3.12. There ``sys.monitoring`` exists, so the span, ready, guard and enrich
rows of the fake vLLM releases run frameless (src/vllm_otel_startup/agent/patching/frameless.py) instead of wrapped,
as they do on the e2e environment's Python 3.11.

A test of the run's fast group (tests/conftest.py), so it runs beside the first real starts, which leave a core
free, rather than before the run as its own step (1.3-1.7 min of the whole run's wall time on CI's host). The
interpreter comes from the machine image (tests/unit/bootstrap_py312.sh); a host without one skips it, saying so.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"^(FAILED|ERROR) ", re.M)


def _py312() -> str:
    r = subprocess.run(["bash", str(ROOT / "tests/unit/bootstrap_py312.sh")], capture_output=True, text=True,
                       cwd=ROOT, timeout=900)
    assert r.returncode == 0, f"tests/unit/bootstrap_py312.sh failed:\n{r.stderr[-3000:]}"
    return r.stdout.strip()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this interpreter runs the unit tier frameless already")
def test_the_unit_tier_passes_where_patch_points_run_frameless(tmp_path):
    py = _py312()
    if not py:
        pytest.skip("this host has no CPython >= 3.12 (tests/unit/bootstrap_py312.sh): the unit tier ran on "
                    f"Python {sys.version.split()[0]} only, with every patch point wrapped")
    version = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    r = subprocess.run([py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", f"--basetemp={tmp_path}",
                        "tests/unit"], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    print(f"unit tier on Python {version}: {tail}")
    failed = [ln for ln in r.stdout.splitlines() if SUMMARY.match(ln)]
    assert r.returncode == 0, (f"the unit tier failed on Python {version} (rc {r.returncode}):\n"
                               + "\n".join(failed) + "\n" + r.stdout[-6000:] + r.stderr[-2000:])
    assert re.search(r"\d+ passed", tail), tail  # it ran tests, not none
