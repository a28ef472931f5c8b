"""Off means off, in a real start (issue 60): ``opentelemetry-instrument vllm serve`` with ``OTEL_SDK_DISABLED=true``
is the plain ``vllm serve`` of the layout matrix (its ``default`` control, shared): the same processes with the same
threads at ready, no log line of ours, no file of ours (start files, spool).

One real start more than the matrix: the three switches go through one gate (``settings.switched_off``, read by the
instrumentor, the distro and the configurator), and each switch's way to that gate under the real
``opentelemetry-instrument`` is unit-tested (tests/unit/test_off_switches.py: threads, import hooks, modules, output,
files). ``OTEL_SDK_DISABLED`` is the one a real start proves: the switch OpenTelemetry documents, and the one that
left the agent running (its progress lines every 5 s, a probe's traceback) before.
"""

from __future__ import annotations

import re

import pytest
from test_layouts import LayoutStart

from support import harness
from support.plans import Session, plan

pytestmark = pytest.mark.e2e

SWITCH = {"OTEL_SDK_DISABLED": "true"}
# a line of ours: our logger's prefix, the printed breakdown's `vllm-otel-startup report` hint, a traceback through our
# modules (not the suite's cache path, ~/.cache/vllm-otel-startup/e2e/venv-vllm, in vLLM's own warnings)
OURS = re.compile(r"(?<![/\w.-])vllm-otel-startup(?![/\w-])|vllm_otel_startup")


@plan("off_switch/sdk_disabled", after=("layout/default/off",))  # the control queued with it, not by the test
def _sdk_disabled(s: Session) -> LayoutStart:
    work = s.workdir / "off" / "sdk"
    threads: list = []
    start = harness.serve(s.tiny_model, work, s.backends, args=["--enforce-eager"], env=SWITCH, expect_ready=False,
                          warm_modelinfo=True, on_ready=lambda proc: threads.extend(harness.process_threads(proc.pid)),
                          scrape=False, timeout=480)
    return LayoutStart(None, start, [], threads)


def _threads(start: LayoutStart) -> list[tuple[str, list[str]]]:
    """Each process's threads, the process named by its title without numbers (the port, a descriptor differ)."""
    return sorted((re.sub(r"\d+", "N", title), names) for title, names in start.threads)


def _ours(path) -> list[str]:
    """What of ours a start left in its cache directory: start files, a spool (under its TMPDIR)."""
    found = [p for p in (path / "starts").rglob("*") if p.is_file()] if (path / "starts").exists() else []
    found += [p for p in (path / "tmp").glob("vllm-otel-startup*")] if (path / "tmp").exists() else []
    return [str(p) for p in found]


def test_otel_sdk_disabled_gives_the_plain_start(e2e):
    off = e2e.later("off_switch/sdk_disabled").result()
    plain = e2e.later("layout/default/off").result()  # the layout matrix's plain control of the same start
    assert plain.start.ready_ns is not None, plain.start.log[-3000:]
    assert off.start.ready_ns is not None, off.start.log[-3000:]
    # the same processes (titles: `vllm serve ...`, VLLM::EngineCore) with the same threads at ready
    assert off.threads and _threads(off) == _threads(plain)
    # nothing printed: no line of ours (progress lines, a breakdown, a warning or traceback)
    assert [ln for ln in off.start.log.splitlines() if OURS.search(ln)] == []
    assert "NonRecordingSpan" not in off.start.log
    # nothing written
    assert _ours(off.start.trace_file_dir.parent) == []
