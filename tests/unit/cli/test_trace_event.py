"""``report --trace-event`` and ``compare --trace-event``: a recorded start as a Chrome Trace Event Format file.

Each file is checked against the format's rules (the Trace Event Format document: the JSON object form with
``traceEvents``; per phase type the keys a viewer requires and their types; complete events with a non-negative
``dur``; metadata naming every process an event uses; slices on one thread nesting) and against the start it
came from: every span a slice of the right duration in µs, every process a named track, the resource readings
as counter tracks."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from numbers import Real

import pytest
from recorded import DATA

from support import ci
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.cli import sources, trace_event

CPU_WITH_READINGS = str(DATA / "aot-off" / "first.jsonl.gz")  # a CPU start that carries vllm.startup.resource.*
CORPUS_COLD = str(DATA / "corpus" / "l4-h256-compiled-cold.jsonl.gz")
CORPUS_WARM = str(DATA / "corpus" / "l4-h256-compiled-warm.jsonl.gz")
GPU_DP2 = str(DATA / "gpu" / "h100x2-llama8b-dp2-cold.jsonl.gz")


def validate(doc: dict) -> dict[int, str]:
    """Structural check against the Trace Event Format; returns {pid: process name}."""
    assert set(doc) >= {"traceEvents"} and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit") in ("ms", "ns")
    names: dict[int, str] = {}
    used: set[int] = set()
    open_by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"], e
        assert isinstance(e["pid"], int) and not isinstance(e["pid"], bool), e
        ph = e["ph"]
        assert ph in ("X", "C", "M"), e
        if ph == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index"), e
            assert isinstance(e["tid"], int) and isinstance(e["args"], dict), e
            if e["name"] == "process_name":
                assert isinstance(e["args"]["name"], str) and e["pid"] not in names, e
                names[e["pid"]] = e["args"]["name"]
            continue
        assert isinstance(e["ts"], Real) and e["ts"] >= 0, e
        used.add(e["pid"])
        if ph == "X":
            assert isinstance(e["tid"], int), e
            assert isinstance(e["dur"], Real) and e["dur"] >= 0, e
            assert isinstance(e.get("cat", ""), str) and isinstance(e.get("args", {}), dict), e
            json.dumps(e["args"])  # args are plain JSON
            open_by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        else:  # a counter: one or more named numeric series
            assert e["args"] and all(isinstance(v, Real) for v in e["args"].values()), e
    assert used <= set(names), "every pid an event uses is a named process"
    for key, slices in open_by_thread.items():  # slices on one thread nest: a viewer draws them as a stack
        stack: list[float] = []
        for start, end in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, (key, start, end)
            stack.append(end)
    return names


def _write(tmp_path, *argv: str) -> dict:
    out = tmp_path / "start.trace.json"
    assert cli.main([*argv, "--trace-event", str(out)]) in (0, 1)
    return json.loads(out.read_text())


def test_a_cpu_start_is_process_tracks_slices_and_counters(tmp_path, capsys):
    doc = _write(tmp_path, "report", CPU_WITH_READINGS)
    assert "trace events: " in capsys.readouterr().out
    names = validate(doc)
    st = sources.one(CPU_WITH_READINGS)
    assert len(names) >= 3 and len(names) == len(st.lanes)
    assert sorted(n.split(" pid ")[0] for n in names.values()) == ["api_server", "engine_core", "worker (rank 0)"]
    t0 = min(s.start for s in st.spans)
    slices = {e["args"]["span_id"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    assert len(slices) == len(st.spans)
    for s in st.spans:  # every phase: a slice of its duration in µs, at its offset from the start's first span
        e = slices[s.span_id]
        assert e["name"] == s.name and e["dur"] == pytest.approx((s.end - s.start) / 1000, abs=1e-3)
        assert e["ts"] == pytest.approx((s.start - t0) / 1000, abs=1e-3)
        assert e["args"].get(sc.PHASE) == s.attrs.get(sc.PHASE)
        waiting = bool(s.attrs.get(sc.WAITING))
        assert (e["cat"] == "waiting") is waiting and e["args"].get("waiting", False) is waiting
    assert any(e["cat"] == "waiting" for e in slices.values())
    by_pid = {pid: {e["name"] for e in doc["traceEvents"] if e["ph"] == "C" and e["pid"] == pid} for pid in names}
    assert all({"CPU cores", "RSS peak (MiB)"} <= tracks for tracks in by_pid.values()), by_pid
    imports = next(s for s in st.lanes[0].spans if s.name == "Imports")  # the API server's imports phase
    at = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "CPU cores"
          and e["ts"] == pytest.approx((imports.start - t0) / 1000, abs=1e-3) and e["pid"] == 1]
    assert at and at[0]["args"]["cores"] == pytest.approx(imports.attrs[sc.RES_CORES_AVG])


def test_a_corpus_start_without_readings_has_no_counters(tmp_path):
    doc = _write(tmp_path, "report", CORPUS_COLD)
    names = validate(doc)
    assert len(names) >= 3
    assert not [e for e in doc["traceEvents"] if e["ph"] == "C"]  # recorded before the resource readings
    assert len([e for e in doc["traceEvents"] if e["ph"] == "X"]) == len(sources.one(CORPUS_COLD).spans)


STARTS = sorted(p for p in DATA.rglob("*.jsonl.gz") if not p.name.endswith(".metrics.jsonl.gz"))


@pytest.mark.parametrize("path", STARTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recorded_start_is_a_valid_file_with_a_track_per_process(path):
    st = sources.one(str(path))
    doc = json.loads(json.dumps(trace_event.document([("", st)])))
    assert len(validate(doc)) == len(st.lanes)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(st.spans)
    failed = sorted(e["name"] for e in slices if e["cat"].endswith(",error"))
    assert failed == sorted(s.name for s in st.spans if s.status == 2)
    assert all(e["args"]["error"] for e in slices if e["cat"].endswith(",error"))


def test_gpu_dp2_start_names_ranks_and_tracks_gpu_memory(tmp_path):
    doc = _write(tmp_path, "report", GPU_DP2)
    names = validate(doc)
    shown = {n.split(" pid ")[0] for n in names.values()}
    assert {"engine_core (dp 0)", "engine_core (dp 1)", "api_server (index 0)", "worker (rank 0)"} <= shown
    gpu = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "GPU memory held (MiB)"]
    assert {names[e["pid"]].split(" pid ")[0] for e in gpu} == {"worker (rank 0)"}
    assert max(e["args"]["MiB"] for e in gpu) > 15 * 1024  # the 8B model's 16 GB of weights, at least


def test_compare_writes_both_starts_side_by_side(tmp_path, capsys):
    doc = _write(tmp_path, "compare", CORPUS_WARM, CORPUS_COLD)
    assert "(A and B side by side)" in capsys.readouterr().out
    names = validate(doc)
    a = {p for p, n in names.items() if n.startswith("A: ")}
    b = {p for p, n in names.items() if n.startswith("B: ")}
    assert len(a) >= 3 and len(b) >= 3 and a | b == set(names) and not a & b
    for side, path in ((a, CORPUS_WARM), (b, CORPUS_COLD)):
        st = sources.one(path)
        xs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] in side]
        assert len(xs) == len(st.spans) and min(e["ts"] for e in xs) == 0  # each side from its own first span
        root = next(e for e in xs if e["name"] == sc.ROOT_SPAN)
        assert root["dur"] == pytest.approx(st.root.duration * 1e6, abs=1e-3)


def test_a_real_trace_viewer_opens_it(tmp_path):
    """speedscope (npm, installed by tests/report/bootstrap.sh; Perfetto UI is not published as a package) reads the
    file as a Chrome trace in headless Chromium, offline, and shows one timeline per process row: its title bar
    names the first process's track and counts three (the CPU start's API server, EngineCore and worker)."""
    install = "bash tests/report/bootstrap.sh"
    browser = ci.command("chromium", "chromium-browser", "google-chrome", install=install)
    home = os.environ.get("VOS_E2E_HOME") or os.path.expanduser("~/.cache/vllm-otel-startup/e2e")
    page = os.path.join(home, "speedscope", "node_modules", "speedscope", "dist", "release", "index.html")
    if not os.path.isfile(page):
        ci.missing(f"speedscope is not at {page}", install)
    doc = _write(tmp_path, "report", CPU_WITH_READINGS)
    loader = tmp_path / "load.js"  # what speedscope's own command line hands the page: the file, base64
    data = base64.b64encode(json.dumps(doc).encode()).decode()
    loader.write_text(f"speedscope.loadFileFromBase64('start.trace.json', {json.dumps(data)})")
    profile = tempfile.mkdtemp()
    try:
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--disable-background-networking", f"--user-data-dir={profile}",
                              "--allow-file-access-from-files", "--virtual-time-budget=8000", "--dump-dom",
                              f"file://{page}#localProfilePath={loader}"],
                             check=True, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "HOME": profile}).stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    first = next(e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name" and e["pid"] == 1)
    assert f"{first} (pid 1), phases (tid 1)" in dom and "1/3)" in dom, dom[-2000:]
