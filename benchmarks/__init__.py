"""The project's benchmarks: every figure docs/results.md and docs/results-log.md publish was measured by one of
these commands (``python -m benchmarks --help`` lists them). Never asserted in tests: each prints what it measured
side by side in one run. Shared here: arms and pairs (pairs.py), the statistics (stats.py), vLLM's log lines
(vllm_log.py) and the GPU driver's thread snapshots (threads.py); gpu/ holds what runs on the GPU machine."""

from __future__ import annotations

import argparse


def command_parser(command: str, doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's argument parser, named as it is run (``python -m benchmarks COMMAND``), its module's docstring
    as the help text."""
    return argparse.ArgumentParser(prog=f"python -m benchmarks {command}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
