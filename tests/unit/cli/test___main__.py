"""cli/__main__.py: ``python -m vllm_otel_startup.cli`` is the ``vllm-otel-startup`` command: main's return value
is the process's exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vllm_otel_startup import __version__

SRC = str(Path(__file__).resolve().parents[3] / "src")


def _module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, timeout=120)


def test_the_module_runs_the_command_and_exits_with_its_status(tmp_path):
    ok = _module("--version")
    assert (ok.returncode, ok.stdout) == (0, f"vllm-otel-startup {__version__}\n")
    bad = _module("report", str(tmp_path / "absent.jsonl"))
    assert bad.returncode == 2 and bad.stderr.startswith("vllm-otel-startup: ")
