"""The README is a user's page: its first screen (what a reader sees before scrolling) says what the agent is, shows a
real start, and gives the install command, the run command, the breakdown, the overhead, the ways to deploy, and
the demo and test commands; the contributor's material (test timings, the code layout) lives in CONTRIBUTING.md.
The install command itself is run by tests/e2e/test_wheel.py, read from here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = "\n".join(README.splitlines()[:55])


def test_the_first_screen_has_what_a_user_needs_in_order():
    wanted = ["\n![", "\ngit clone https://github.com/vllm-otel-startup/vllm-otel-startup",
              "\npip install ./vllm-otel-startup", "\nopentelemetry-instrument vllm serve MODEL",
              "\nvllm-otel-startup report", "outcome=ready", "\ncritical path:", "\n**Overhead:**",
              "docs/deploying.md", "\nbash scripts/demo.sh --enforce-eager", "\nbash tests/run.sh"]
    where = [FIRST_SCREEN.find(w) for w in wanted]
    assert -1 not in where, [w for w, i in zip(wanted, where, strict=True) if i < 0]
    assert where == sorted(where), wanted
    assert "not on PyPI yet" in FIRST_SCREEN and "`pip install vllm-otel-startup` once it is published" in FIRST_SCREEN


def test_the_picture_is_a_committed_waterfall():
    [path] = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", FIRST_SCREEN)
    assert path.startswith("docs/img/waterfall-") and (ROOT / path).is_file(), path


def test_the_first_screen_has_no_contributor_material():
    assert not re.search(r"\d+(\.\d+)? ?min\b", FIRST_SCREEN)  # no test-suite minutes
    assert "## Layout" not in README and "src/vllm_otel_startup/agent" not in README
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert "## Layout" in contributing and "## Adding a phase" in contributing and "~22 min" in contributing


def test_the_repository_url_is_the_projects():
    import tomllib

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    [clone] = re.findall(r"^git clone (\S+)$", README, re.M)
    assert clone == urls["Repository"]
