"""Per-export cost of our local OTLP-JSON file exporter (agent/export/file_exporter.py) against the OTLP JSON file
exporter package of the same OpenTelemetry release line (``opentelemetry-exporter-otlp-json-file``), on the spans of
a recorded start, and whether the two write the same spans.

    pip install --no-deps --target /tmp/ojf opentelemetry-exporter-otlp-json-file==0.66b1 \\
        opentelemetry-exporter-otlp-json-common==0.66b1 opentelemetry-proto-json==0.66b1
    PYTHONPATH=/tmp/ojf python -m benchmarks file-exporter [START.jsonl.gz]

Two batch sizes: one span (an export per phase end) and every span of the start (the export at ready). The resource
carries an ``--api-key`` in ``process.command_args``: whether each file writes it.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.spanmodel import parse_text


def sdk_spans(path: str) -> list:
    """The start's spans made again as SDK ReadableSpans (same names, attributes, times, API server resource)."""
    st = sources.one(path)
    mem = InMemorySpanExporter()
    args = [*st.root.resource.get("process.command_args", []), "--api-key", "sk-bench-secret"]
    provider = TracerProvider(resource=Resource.create({**st.root.resource, "process.command_args": args}))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("vllm_otel_startup")
    root = tracer.start_span(st.root.name, attributes=st.root.attrs, start_time=st.root.start)
    ctx = trace.set_span_in_context(root)  # one trace, as a start is: our exporter writes one file per trace
    for s in sorted(st.spans, key=lambda x: x.start):
        if s is not st.root:
            tracer.start_span(s.name, context=ctx, attributes=s.attrs, start_time=s.start).end(end_time=s.end)
    root.end(end_time=st.root.end)
    return list(mem.get_finished_spans())


def timed(exports: tuple, batches: list, rounds: int) -> tuple[float, float, float]:
    """Median µs per export call of each exporter, and the median of the per-round ratios (package / ours): the
    rounds alternate between the two, so a busy host slows both alike."""
    times: list[list[float]] = [[], []]
    for _ in range(rounds):
        for n, export in enumerate(exports):
            t = time.perf_counter()
            for b in batches:
                export(b)
            times[n].append((time.perf_counter() - t) / len(batches) * 1e6)
    ratio = statistics.median(b / a for a, b in zip(*times, strict=True))
    return statistics.median(times[0]), statistics.median(times[1]), ratio


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks file-exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("start", nargs="?", default="tests/data/starts/dev/compiled-warm.jsonl.gz",
                        help="a recorded start (our OTLP JSON lines)")
    path = parser.parse_args(argv).start
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    spans = sdk_spans(path)
    with tempfile.TemporaryDirectory() as d:
        ours = StartupFileExporter(os.path.join(d, "ours"), keep=1000)
        theirs = FileSpanExporter(os.path.join(d, "theirs.jsonl"))
        for label, batches, rounds in (("1 span", [[s] for s in spans], 20), (f"{len(spans)} spans", [spans], 200)):
            a, b, ratio = timed((ours.export, theirs.export), batches, rounds)
            print(f"{label:>10}: ours {a:8.1f} µs/export   package {b:8.1f} µs/export   package/ours {ratio:.2f}")
        theirs.shutdown()
        # the same spans? one export each, read back by our reader
        for f in os.listdir(d):
            if f != "ours":
                os.unlink(os.path.join(d, f))
        ours_dir = os.path.join(d, "ours")
        for f in os.listdir(ours_dir):
            os.unlink(os.path.join(ours_dir, f))
        StartupFileExporter(ours_dir, keep=1000).export(spans)
        one = FileSpanExporter(os.path.join(d, "theirs.jsonl"))
        one.export(spans)
        one.shutdown()
        [mine] = os.listdir(ours_dir)
        a_spans = parse_text(Path(ours_dir, mine).read_text(), "ours")
        b_spans = parse_text(Path(d, "theirs.jsonl").read_text(), "package")
        key = lambda s: (s.span_id, s.name, s.start, s.end, s.parent_id, sorted(s.attrs.items(), key=str))  # noqa: E731
        print("same spans:", sorted(map(key, a_spans)) == sorted(map(key, b_spans)),
              f"({len(a_spans)} vs {len(b_spans)})")
        for label, sp in (("ours", a_spans), ("package", b_spans)):
            leaked = "sk-bench-secret" in str(sp[0].resource.get("process.command_args"))
            print(f"{label}: the resource's --api-key value {'written' if leaked else 'scrubbed'}")
    return 0
