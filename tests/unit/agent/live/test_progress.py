"""A start in progress (agent/live/progress.py): the open phase stack, detail and waiting spans on it, the in-
progress series and their end at ready, the one-line tick. The real proof is tests/e2e/test_live_startup.py."""

from __future__ import annotations

import json
import time

from spans import ANY, assert_attributes

from vllm_otel_startup import semconv as sc


def gauges(reader, name: str) -> list:
    data = reader.get_metrics_data()
    return [dp for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics
            if m.name == name for dp in m.data.data_points]


def test_the_stack_follows_open_phases_and_the_innermost_is_current(start):
    s = start("worker")
    t = s.rt.tracer
    outer = t.start_span("Prepare model")  # vLLM's native name: kv_cache_init
    inner = t.start_span("torch.compile")
    snap = s.rt.live.snapshot()
    assert [e["phase"] for e in snap["stack"]][-2:] == ["kv_cache_init", "torch_compile"]
    assert snap["stack"][0]["phase"] == "worker_process"  # the process span is the outermost
    assert snap["phase"] == "torch_compile" and snap["process_kind"] == "worker"
    assert snap["elapsed_s"] >= snap["phase_elapsed_s"] >= 0
    inner.end()
    assert s.rt.live.snapshot()["phase"] == "kv_cache_init"
    again = t.start_span("torch.compile")  # the second torch.compile of this process: occurrence 1
    assert s.rt.live.snapshot()["stack"][-1]["occurrence"] == 1
    again.end()
    outer.end()


def test_detail_spans_and_waiting_spans(start):
    s = start("engine_core")
    t = s.rt.tracer
    wait = t.start_span("Worker wait ready")
    assert s.rt.live.snapshot()["stack"][-1]["waiting"] is True
    stage = t.start_span("inductor_compile", attributes={sc.PHASE: "torch_compile_stage"})  # a detail phase
    assert s.rt.live.snapshot()["phase"] == "worker_wait"
    stage.end()
    wait.end()


def test_in_progress_series_while_starting_and_none_after_ready(start, metrics_reader):
    s = start("worker")
    span = s.rt.tracer.start_span("Load weights")
    time.sleep(0.05)
    [dp] = gauges(metrics_reader, "vllm.startup.in_progress.phase_elapsed")
    assert dp.attributes[sc.PHASE] == "weights_load" and dp.attributes[sc.PROCESS_KIND] == "worker"
    assert dp.attributes[sc.TRACE_ID] == s.rt.trace_id() and sc.MODEL in dp.attributes  # fleet labels
    assert dp.value >= 0.05
    [el] = gauges(metrics_reader, "vllm.startup.in_progress.elapsed")
    assert el.value >= dp.value
    assert not gauges(metrics_reader, "vllm.startup.in_progress.remaining")  # no history: no number
    span.end()
    s.rt.finish()
    assert not gauges(metrics_reader, "vllm.startup.in_progress.phase_elapsed")


def test_no_per_process_labels_on_the_new_series():
    for _name, (_kind, _unit, labels, _doc) in sc.LIVE_METRICS.items():
        assert not {"process.pid", sc.WORKER_RANK} & set(labels)


def test_tick_prints_one_line_and_records_a_progress_span(start, capsys):
    s = start("api_server")
    span = s.rt.tracer.start_span("Config resolution")
    s.rt.live.tick()
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("vllm-otel-startup: starting: Config resolution ")
    assert "no recorded start of this model and configuration: no estimate" in line
    [rec] = s.spans(sc.PROGRESS_SPAN)
    assert_attributes(rec, {sc.LIVE_PHASE: "config", sc.LIVE_PHASE_STACK: ("startup", "config"), sc.LIVE_HISTORY: 0,
                            sc.LIVE_ELAPSED_S: ANY, sc.LIVE_PHASE_ELAPSED_S: ANY}, allow=())  # not a phase
    assert rec.parent.span_id == s.rt.process_span.get_span_context().span_id
    assert rec.end_time == rec.start_time  # a mark: zero-length
    s.rt.live.tick()  # same phase, seconds later: no second record
    assert len(s.spans(sc.PROGRESS_SPAN)) == 1
    span.end()


def test_a_child_writes_its_state_for_the_api_server_only_when_its_open_phases_changed(start, monkeypatch):
    """Each write is a few syscalls on our thread beside vLLM's busy main thread; the API server moves a state's
    elapsed times on from its ``at_ns`` (Live.processes), so an unchanged stack needs no new write."""
    from vllm_otel_startup.agent.export import spool

    written: list[dict] = []
    monkeypatch.setattr(spool, "write_live", lambda tid, name, text: written.append(json.loads(text)) or True)
    s = start("engine_core")
    span = s.rt.tracer.start_span("Load weights")
    s.rt.live.tick()
    s.rt.live.tick()  # the same open phases: not written again
    assert [w["phase"] for w in written] == ["weights_load"]
    span.end()
    s.rt.live.tick()  # its phase ended: written
    assert len(written) == 2 and written[-1]["phase"] != "weights_load"
    s.rt.live.children = [written[0]]  # as the API server reads it, later: its elapsed times moved on to now
    time.sleep(0.02)
    child = s.rt.live.processes()[1]  # (this process's own state first)
    assert child["phase"] == "weights_load" and child["phase_elapsed_s"] >= written[0]["phase_elapsed_s"] + 0.02
