"""A process's bootstrap segments (agent/resources/segments.py): the spans that cut its process span before its first
phase (interpreter start, imports, CLI, event loop, process entry), each a child of the process span over exactly
its interval, with the resource readings taken at its two ends."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from spans import ANY, RESOURCE, assert_attributes

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources.sampler import Sampler
from vllm_otel_startup.agent.resources.segments import Segments

MS = 10**6
ALWAYS = {sc.RES_CPU_TIME: ANY, sc.RES_CORES_AVG: ANY, sc.RES_SAMPLES: ANY}  # every summary has these (sampler.py)


class Process:
    """A tracer whose spans are kept, and a process span to cut."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("t")
        self.span = self.tracer.start_span(sc.ROOT_SPAN, start_time=0)

    def segments(self) -> Segments:
        seg = Segments(self.tracer)
        seg.parent = self.span
        return seg

    def ended(self):
        return self.exporter.get_finished_spans()


@pytest.fixture
def process() -> Process:
    return Process()


def test_a_segment_is_a_child_of_the_process_span_over_its_interval(process):
    process.segments().emit(sc.INTERPRETER_START_SPAN, 10 * MS, 40 * MS)
    [span] = process.ended()
    assert span.name == sc.INTERPRETER_START_SPAN
    assert (span.start_time, span.end_time) == (10 * MS, 40 * MS)
    assert span.parent.span_id == process.span.get_span_context().span_id
    assert span.context.trace_id == process.span.get_span_context().trace_id
    assert_attributes(span, {}, allow=())  # no readings given: no resource attributes


def test_no_segment_before_the_process_span_or_over_an_empty_interval(process):
    seg = Segments(process.tracer)
    seg.emit(sc.IMPORTS_SPAN, 0, 10 * MS)  # no process span yet
    seg.parent = process.span
    seg.emit(sc.IMPORTS_SPAN, 10 * MS, 10 * MS)
    seg.emit(sc.IMPORTS_SPAN, 10 * MS, 5 * MS)  # a clock that went back
    assert process.ended() == ()


def test_a_segment_carries_the_readings_between_its_two_snapshots(process):
    seg = process.segments()
    seg.sampler = Sampler(host=False)
    a = seg.sampler.snapshot()
    b = seg.sampler.snapshot()
    seg.emit(sc.CLI_SPAN, a.t, max(b.t, a.t + 1), a, b)
    seg.emit(sc.EVENT_LOOP_SPAN, b.t, b.t + MS, a, None)  # one end unknown: no readings rather than wrong ones
    with_readings, without = process.ended()
    assert_attributes(with_readings, ALWAYS, allow=RESOURCE)
    assert_attributes(without, {}, allow=())


def test_closing_ends_the_open_segment_and_opens_the_next(process):
    seg = process.segments()
    seg.begin(sc.IMPORTS_SPAN, 5 * MS, None)
    assert seg.open == (sc.IMPORTS_SPAN, 5 * MS)
    seg.close(20 * MS, sc.CLI_SPAN)
    assert seg.open == (sc.CLI_SPAN, 20 * MS)
    seg.close(30 * MS)  # the first phase begins: no segment after it
    assert seg.open is None
    assert [(s.name, s.start_time, s.end_time) for s in process.ended()] == [
        (sc.IMPORTS_SPAN, 5 * MS, 20 * MS), (sc.CLI_SPAN, 20 * MS, 30 * MS)]


def test_closing_when_the_start_is_over_opens_nothing_and_nothing_open_makes_no_span(process):
    seg = process.segments()
    seg.close(10 * MS)  # nothing open
    assert process.ended() == ()
    seg.begin(sc.PROCESS_ENTRY_SPAN, 10 * MS, None)
    seg.close(20 * MS, sc.CLI_SPAN, more=False)
    assert seg.open is None
    [span] = process.ended()
    assert (span.name, span.end_time) == (sc.PROCESS_ENTRY_SPAN, 20 * MS)


def test_a_closed_segment_is_measured_from_its_begin_to_its_close(process):
    seg = process.segments()
    seg.sampler = Sampler(host=False)
    seg.sampler.start()
    try:
        begun = seg.sampler.snapshot()
        seg.begin(sc.IMPORTS_SPAN, begun.t, begun)
        seg.close(begun.t + 50 * MS, sc.CLI_SPAN)
        seg.close(begun.t + 60 * MS)
    finally:
        seg.sampler.stop_now(2.0)
    imports, cli = process.ended()
    assert_attributes(imports, ALWAYS, allow=RESOURCE)  # the readings at begin() and at close()
    assert_attributes(cli, ALWAYS, allow=RESOURCE)  # close()'s own reading starts the next segment
