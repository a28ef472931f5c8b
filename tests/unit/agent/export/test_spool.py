"""The cross-process spool (agent/export/spool.py): a child's spans reach the API server, which exports them as its
own process's."""

from __future__ import annotations

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import spool
from vllm_otel_startup.model.spanmodel import from_readable


def test_spool_hands_a_childs_spans_to_the_api_server(otel, tmp_path, monkeypatch):
    provider, exporter = otel
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with provider.get_tracer("t").start_as_current_span("Load weights", attributes={sc.PHASE: "weights_load"}):
        pass
    [ended] = exporter.get_finished_spans()
    trace_id = f"{ended.context.trace_id:032x}"
    assert spool.write(trace_id, "worker-42", [ended])
    [back] = spool.read(trace_id)
    assert back == from_readable(ended) and back.name == "Load weights"
    spool.remove(trace_id)
    assert spool.read(trace_id) == []
