"""Several engines built one after another in one process (issue 60): a program of the user's that builds an ``LLM``,
shuts it down and builds another (a sweep over settings, a retry after a failure) gives one start per engine, each a
trace of its own in the store: the first from the process's creation (its interpreter start and imports), a later
one from its engine's construction (``create_time_source`` ``engine``), each ending where its engine is ready, each
with its own EngineCore process under it and its critical path named. Real: the tiny model under
``opentelemetry-instrument python`` (support/engine_script.py), exported over OTLP to the session's Phoenix."""

from __future__ import annotations

import json
import re

import pytest

from support import harness
from support.plans import Session, plan
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.spanmodel import parse_otlp
from vllm_otel_startup.model.start import Start

pytestmark = pytest.mark.e2e

ENGINES = 2
CP_GOAL = 0.98


@plan("engines/one_process", alone=True)  # alone, as the other scripts' starts (test_layouts.py: _alone)
def _engines(s: Session) -> harness.Start:
    work = s.workdir / "ly" / "llm2"
    return harness.run_engine_script(s.tiny_model, work, s.backends, mode="llm", count=ENGINES, hold_s=1.0,
                                     timeout=600)


@pytest.fixture(scope="module")
def engines(e2e, backends) -> tuple[harness.Start, list[Start], list[int]]:
    """The run, its starts (from the store, in the order they began, one per local trace file) and the script's
    READY instants."""
    run = e2e.later("engines/one_process").result()
    assert run.returncode == 0, run.log[-3000:]
    starts = []
    for path in sorted(run.trace_file_dir.glob("*.jsonl")):
        written = [sp for line in path.read_text().splitlines() if line.strip() for sp in parse_otlp(json.loads(line))]
        starts.append(Start(backends.trace(written[0].trace_id, expect=len(written))))
    readies = [int(n) for n in re.findall(r"^READY (\d+)$", run.log, re.M)]
    return run, sorted(starts, key=lambda st: st.root.start), readies


def test_each_engine_is_a_start_of_its_own(engines):
    run, starts, readies = engines
    assert len(readies) == ENGINES, run.log[-3000:]
    assert len(starts) == ENGINES and len({st.trace_id for st in starts}) == ENGINES
    first, *later = starts
    assert first.root.start <= run.spawn_ns + 1_000_000_000  # from the process's creation (spawn: the harness's clock)
    assert first.root.attrs.get(sc.PROCESS_CREATE_TIME_SOURCE) == "proc"
    for before, st in zip(starts, later, strict=False):
        assert st.root.start >= before.root.end
        assert st.root.attrs.get(sc.PROCESS_CREATE_TIME_SOURCE) == "engine"
        own = {sp.name for sp in st.spans if sp.parent_id == st.root.span_id}  # its EngineCore has its own
        assert {sc.IMPORTS_SPAN, sc.INTERPRETER_START_SPAN}.isdisjoint(own), own
    assert sc.IMPORTS_SPAN in {sp.name for sp in first.spans if sp.parent_id == first.root.span_id}
    for st, ready_ns in zip(starts, readies, strict=True):
        assert st.ready and st.root.attrs.get(sc.PROCESS_KIND) == "api_server"
        assert st.root.attrs.get("process.pid") == run.pid
        # each ends where its engine is ready: the script prints READY right after LLM(...) returns
        assert 0 <= ready_ns - st.root.end < 1_000_000_000, (st.root.end, ready_ns)


def test_each_start_has_its_own_engine_process_and_its_critical_path_named(engines):
    _, starts, _ = engines
    pids = []
    for i, st in enumerate(starts):
        [llm_init] = [sp for sp in st.spans if sp.name == "LLM init"]
        assert llm_init.parent_id == st.root.span_id
        cores = [sp for sp in st.spans if sp.attrs.get(sc.PROCESS_KIND) == "engine_core"
                 and sp.name == "EngineCore process"]
        assert len(cores) == 1, [sp.name for sp in st.spans if sp.parent_id == llm_init.span_id]
        pids.append(cores[0].attrs.get("process.pid"))
        cp = st.critical_path
        print(f"engine {i}: root {st.root.duration:.2f} s, LLM init {llm_init.duration:.2f} s, "
              f"critical path {100 * cp.share:.1f} % named")
        assert cp.share >= CP_GOAL, f"engine {i}: {cp.headline(top=5)}"
    assert len(set(pids)) == ENGINES  # a new EngineCore per engine
