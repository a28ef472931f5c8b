"""vLLM's process titles survive OpenTelemetry's bootstrap (patching/proctitle.py). Real setproctitle in a real child
interpreter whose environment starts with PYTHONPATH, rewritten to the same text as OpenTelemetry's sitecustomize
rewrites it in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("setproctitle")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and glibc's environ")

SRC = str(Path(__file__).resolve().parents[4] / "src")
CHILD = """
import os, sys
os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"]  # glibc gives it a new string: as OpenTelemetry's bootstrap does
if sys.argv[1] == "restore":
    from vllm_otel_startup.agent.patching.proctitle import restore_first_env_string
    print(restore_first_env_string())
import setproctitle
setproctitle.setproctitle("VLLM::EngineCore")
print(open("/proc/self/comm").read().strip())
"""


def run(mode: str, first: str | None = "PYTHONPATH") -> list[str]:
    rest = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env = {"PYTHONPATH": SRC, **rest} if first == "PYTHONPATH" else {**rest, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_rewritten_first_pythonpath_breaks_the_title_and_is_put_back():
    assert run("control") != ["VLLM::EngineCor"]  # the failure this guards against, reproduced
    assert run("restore") == ["True", "VLLM::EngineCor"]


def test_nothing_is_touched_where_pythonpath_is_not_first():
    assert run("restore", first=None) == ["False", "VLLM::EngineCor"]


def test_the_kernels_environment_is_found():
    from vllm_otel_startup.agent.patching.proctitle import env_start

    assert env_start()
