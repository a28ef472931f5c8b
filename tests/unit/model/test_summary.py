"""The breakdown printed at ready (``summary.render``): it matches the trace, names the process and the key
causes and the top advice, never raises, is cheap, and imports nothing heavy."""

from __future__ import annotations

import copy
import os
import re
import statistics
import subprocess
import sys
import time

import pytest
from recorded import DEV, dev, named

from vllm_otel_startup.model import summary
from vllm_otel_startup.model.facts import seconds
from vllm_otel_startup.model.spanmodel import Span

ROW = re.compile(r"^\s*(\S+ s)\s+(\d+)%\s\s(API server|EngineCore|worker(?: \d+)?)\s+(\S.*?)(?:  \((.*))?$")


def _rows(text: str) -> list[tuple[str, int, str, str, str]]:
    return [m.groups() for line in text.splitlines() if (m := ROW.match(line))]


@pytest.mark.parametrize("name", DEV)
def test_every_printed_phase_matches_the_trace(name):
    st = dev(name)
    text = summary.render(st.spans)
    rows = _rows(text)
    assert rows, text
    total = st.root.duration
    for dur, share, proc, names, _ in rows:
        span_name = names.split(" > ")[0].strip()
        candidates = [s for s in st.spans if s.name == span_name and seconds(s.duration) == dur]
        assert candidates, f"{names}: no {span_name!r} span of {dur} in the trace"
        assert int(share) == round(100 * candidates[0].duration / total)
        kind = {"API server": "api_server", "EngineCore": "engine_core"}.get(proc, "worker")
        assert candidates[0].attrs["vllm.startup.process_kind"] == kind


def test_compiled_cold_start_shows_its_causes_process_and_advice():
    st = dev("compiled-cold")
    text = summary.render(st.spans, source="x.jsonl")
    compile_span = named(st, "torch.compile")
    row = next(r for r in _rows(text) if r[3].endswith("torch.compile"))
    assert row[0] == seconds(compile_span.duration) and row[2] == "worker 0"
    assert "compile cache miss" in row[4]
    assert text.splitlines()[0].startswith(f"vLLM startup: ready in {seconds(st.root.duration)}")
    assert "cold cache root" in text.splitlines()[0]
    assert "causes: modelinfo cache miss" in text and "compile cache miss, 15 C++ builds" in text
    assert "advice: put VLLM_CACHE_ROOT" in text and "because: [torch.compile]" in text
    assert text.splitlines()[-1].endswith("full tree: vllm-otel-startup report x.jsonl)")


def test_warm_eager_start_has_no_advice_and_failed_start_names_its_error():
    assert "advice:" not in summary.render(dev("eager-warm").spans)
    text = summary.render(dev("bad-model").spans)
    first = text.splitlines()[0]
    assert first.startswith("vLLM startup: FAILED after") and "in Engine arguments: HFValidationError" in first
    assert any(r[3].strip() == "Engine arguments" for r in _rows(text))  # the failed phase is shown, however short


def test_width_is_respected_for_the_tree():
    for line in summary.render(dev("compiled-cold").spans, width=80).splitlines()[1:]:
        assert len(line) <= 80 or line.startswith("(")


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("true", True), ("0", False), ("false", False),
                                       ("OFF", False), ("no", False), (" 0 ", False)])
def test_env_var_turns_it_off(value, on):
    env = {} if value is None else {summary.ENV: value}
    assert summary.enabled(env) is on
    assert summary.ENV == "OTEL_PYTHON_VLLM_STARTUP_SUMMARY"


def _odd_inputs():
    base = dev("compiled-warm").spans
    yield "empty", []
    yield "no root", [s for s in base if s.name != "vLLM startup"]
    lost = copy.deepcopy(base)
    for s in lost:
        if s.name in ("EngineCore process", "Worker process"):
            s.parent_id = "ffffffffffffffff"  # parents lost in export
    yield "orphans", lost
    cyc = copy.deepcopy(base)
    cyc[0].parent_id, cyc[1].parent_id = cyc[1].span_id, cyc[0].span_id
    yield "cycle", cyc
    weird = copy.deepcopy(base)
    for s in weird:
        s.attrs = {k: ([v] if isinstance(v, (int, float)) else None) for k, v in s.attrs.items()}
        s.attrs["vllm.startup.phase"] = None
        s.resource = {}
    yield "wrong attribute types", weird
    backwards = copy.deepcopy(base)
    for s in backwards:
        s.start, s.end = s.end, s.start
    yield "end before start", backwards
    yield "one bare root", [Span("t", "r", None, "vLLM startup", 5, 5, {}, {})]
    yield "self parent", [Span("t", "r", "r", "vLLM startup", 0, 10, {}, {})]
    yield "not spans", [object()]  # type: ignore[list-item]


@pytest.mark.parametrize("label, spans", list(_odd_inputs()))
def test_never_raises_on_odd_input(label, spans):
    out = summary.render(spans)
    assert isinstance(out, str) and out


def _many_spans(n_starts: int = 3) -> list[Span]:
    out: list[Span] = []
    for k, name in enumerate(("compiled-cold", "compiled-warm", "eager-cold")[:n_starts]):
        for s in copy.deepcopy(dev(name).spans):
            if k and s.name == "vLLM startup":
                s.name, s.parent_id = "Extra", None
            s.span_id = f"{k:x}{s.span_id[1:]}"
            s.parent_id = f"{k:x}{s.parent_id[1:]}" if s.parent_id else None
            out.append(s)
    return out


def test_cheap_for_150_spans():
    spans = _many_spans()
    assert len(spans) >= 140
    summary.render(spans)
    times = []
    for _ in range(7):
        t = time.perf_counter()
        summary.render(spans)
        times.append(time.perf_counter() - t)
    assert statistics.median(times) < 0.05, times


def test_imports_nothing_heavy():
    code = ("import sys, time; import vllm_otel_startup; before = set(sys.modules); t = time.perf_counter(); "
            "import vllm_otel_startup.model.summary; dt = time.perf_counter() - t; "
            "new = sorted(set(sys.modules) - before); "
            "heavy = [m for m in new if m.split('.')[0] in ('numpy', 'PIL', 'torch', 'vllm', 'matplotlib')]; "
            "print(dt, heavy, new)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    dt, heavy, new = out.split(" ", 2)
    assert heavy == "[]", out
    assert all(m.startswith("vllm_otel_startup") or m in ("textwrap",) for m in eval(new)), new  # noqa: S307
    assert float(dt) < 0.25, out  # loose: a heavy import costs seconds; the module list above is the real check


def test_at_the_ready_point_with_only_the_api_servers_spans():
    st = dev("compiled-cold")
    own = [s for s in st.spans if s.attrs.get("vllm.startup.process_kind") == "api_server"]
    root = next(s for s in own if s.name == "vLLM startup")
    root.end = 0  # still open when the summary is rendered
    before = [(s.span_id, len(s.children)) for s in own]
    text = summary.render(own)
    assert text.startswith("vLLM startup: ready in ")
    assert "Engine handshake" in text  # the EngineCore's spans are missing: the wait is what there is to show
    assert [(s.span_id, len(s.children)) for s in own] == before  # the caller's spans are left alone
    assert "Engine handshake" not in summary.render(dev("compiled-cold").spans)
