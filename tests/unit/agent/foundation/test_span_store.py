"""A value per span for as long as the span lives (agent/foundation/span_store.py): one part of the agent fills the
slot, another reads it, and nothing is set on the SDK's span object; the slot keys weakly, so a dropped span takes
its value along, and a span that cannot be weakly referenced simply has no slot."""

from __future__ import annotations

import gc
import weakref

from opentelemetry.sdk.trace import TracerProvider
from spans import assert_attributes

from vllm_otel_startup.agent.foundation.span_store import END_TIMES, SpanSlot


class Value:
    """A value the test can watch being collected."""


def test_a_value_set_for_a_span_is_read_back_for_that_span_only():
    tracer = TracerProvider().get_tracer("t")
    a, b = tracer.start_span("a"), tracer.start_span("b")
    slot: SpanSlot[str] = SpanSlot()
    slot.set(a, "for a")
    assert slot.get(a) == "for a"
    assert slot.get(b) is None and slot.get(b, "default") == "default"
    slot.set(a, "again")  # a later set replaces the value
    assert slot.get(a) == "again"
    assert_attributes(a, {}, allow=())  # nothing was set on the span itself


def test_two_slots_keep_their_values_apart():
    span = TracerProvider().get_tracer("t").start_span("s")
    first, second = SpanSlot(), SpanSlot()
    first.set(span, 1)
    assert second.get(span) is None and first.get(span) == 1


def test_the_slot_does_not_keep_the_span_or_its_value_alive():
    tracer = TracerProvider().get_tracer("t")
    span, value = tracer.start_span("s"), Value()
    slot: SpanSlot[Value] = SpanSlot()
    slot.set(span, value)
    span.end()
    span_ref, value_ref = weakref.ref(span), weakref.ref(value)
    del span, value
    gc.collect()
    assert span_ref() is None and value_ref() is None


def test_a_span_that_cannot_be_weakly_referenced_has_no_slot():
    slot: SpanSlot[int] = SpanSlot()
    for double in (object(), ("a", "tuple"), 7):  # weakref.ref() refuses each of these
        slot.set(double, 5)  # no error: the writer loses nothing but the slot
        assert slot.get(double) is None
        assert slot.get(double, 9) == 9  # the reader falls back to its default
    unhashable = {"a": 1}
    slot.set(unhashable, 5)
    assert slot.get(unhashable, 9) == 9


def test_end_times_is_a_slot_of_end_times_keyed_by_sdk_spans():
    span = TracerProvider().get_tracer("t").start_span("Load weights", start_time=1_000)
    assert isinstance(END_TIMES, SpanSlot)
    assert END_TIMES.get(span) is None  # nobody has ended it yet
    END_TIMES.set(span, 5_000)
    span.end(end_time=5_000)
    assert END_TIMES.get(span) == span.end_time == 5_000
