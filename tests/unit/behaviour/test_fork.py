"""VLLM_WORKER_MULTIPROC_METHOD=fork: a forked child runs no sitecustomize and leaves through os._exit."""

from __future__ import annotations

import json
import os
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
from vllm_otel_startup.agent.export.processor import StartupSpanProcessor
from vllm_otel_startup.agent.foundation.process import ENV_KIND, ENV_PARENT, ProcessInfo
from vllm_otel_startup.agent.runtime import Runtime


def test_forked_child_becomes_the_announced_process_and_delivers_without_atexit(tmp_path, monkeypatch):
    # the child leaves through os._exit right at its ready point, whose wait for the export is FLUSH_MS (25 ms): on a
    # loaded host (CI ran this beside real starts) the file export took longer and was cut off. A real forked child
    # serves on after its ready point; here the wait may last until the export is done.
    monkeypatch.setenv(settings.FLUSH_MS.name, "10000")
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(StartupFileExporter(str(tmp_path))))
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME)
    now = time.time_ns()
    rt = Runtime(ProcessInfo("api_server", os.getpid(), now - 10**8, "proc", now, ["vllm", "serve"]), tracer, provider)
    provider.add_span_processor(StartupSpanProcessor(rt))
    rt.start()
    os.register_at_fork(after_in_child=rt.after_fork_in_child)
    try:
        root = rt.process_span.get_span_context()
        os.environ[ENV_KIND] = "engine_core"  # what our spawn hook sets around Process.start()
        os.environ[ENV_PARENT] = f"00-{root.trace_id:032x}-{root.span_id:016x}-01"
        pid = os.fork()
        if pid == 0:  # the child: a startup phase, its ready point, then os._exit as multiprocessing does
            code = 1
            try:
                with tracer.start_as_current_span("Init device"):
                    pass
                rt.finish()
                code = 0 if rt.info.kind == "engine_core" else 3
            finally:
                os._exit(code)
        os.environ.pop(ENV_KIND)
        os.environ.pop(ENV_PARENT)
        assert os.waitpid(pid, 0)[1] == 0
        rt.finish()
        provider.force_flush()
        lines = (tmp_path / f"{root.trace_id:032x}.jsonl").read_text().splitlines()
        spans = [s for line in lines for rs in json.loads(line)["resourceSpans"]
                 for ss in rs["scopeSpans"] for s in ss["spans"]]
        by_name = {s["name"]: s for s in spans}
        core = by_name[sc.ENGINE_CORE_PROCESS_SPAN]
        assert core["parentSpanId"] == f"{root.span_id:016x}"
        assert by_name["Init device"]["parentSpanId"] == core["spanId"]
        assert by_name[sc.ROOT_SPAN]["spanId"] == f"{root.span_id:016x}"
    finally:
        rt.active = False  # the at-fork hook stays registered in this test process: make it inert
        provider.shutdown()
