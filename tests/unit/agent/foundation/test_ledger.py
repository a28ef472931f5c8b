"""This process's ended startup spans and pending cause attributes (agent/foundation/ledger.py): what the gap
accounting, the metrics and the spool are made of. The runtime is a ledger; the span processor and probes write it."""

from __future__ import annotations

import threading

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.ledger import SpanLedger
from vllm_otel_startup.agent.runtime import Runtime

S = 10**9


class Ended:
    """SDK spans ended at given times, under a given parent."""

    def __init__(self) -> None:
        self.tracer = TracerProvider().get_tracer("t")

    def __call__(self, name: str, start: float, end: float, parent=None, phase: str | None = None):
        ctx = trace.set_span_in_context(parent) if parent is not None else Context()  # a root whatever is current
        span = self.tracer.start_span(name, context=ctx, start_time=int(start * S),
                                      attributes={sc.PHASE: phase} if phase else None)
        span.end(end_time=int(end * S))
        return span


def test_an_ended_span_is_kept_for_the_gap_accounting_and_for_the_metrics():
    ended, ledger = Ended(), SpanLedger()
    root = ended("process", 0, 10)
    child = ended("Load weights", 1, 4, parent=root, phase="weights_load")
    ledger.record_local(child)
    assert ledger.local_spans() == [(1 * S, 4 * S, "Load weights", child.context.span_id, root.context.span_id,
                                     "weights_load")]
    assert ledger.ended_spans() == [child]
    ledger.record_local(root)
    assert ledger.local_spans()[1] == (0, 10 * S, "process", root.context.span_id, None, None)  # a root: no parent


def test_a_span_kept_without_its_interval_counts_for_the_metrics_only():
    ended, ledger = Ended(), SpanLedger()
    span = ended("API servers ready", 0, 3)
    ledger.record_local(span, interval=False)
    assert ledger.ended_spans() == [span] and ledger.local_spans() == []


def test_the_readers_get_copies_taken_under_the_lock():
    ended, ledger = Ended(), SpanLedger()
    ledger.record_local(ended("a", 0, 1))
    ledger.local_spans().clear()
    ledger.ended_spans().clear()
    assert len(ledger.local_spans()) == len(ledger.ended_spans()) == 1


def test_spans_recorded_from_many_threads_are_all_kept():
    ended, ledger = Ended(), SpanLedger()
    spans = [ended(f"s{i}", i, i + 1) for i in range(400)]
    threads = [threading.Thread(target=lambda part=spans[k::8]: [ledger.record_local(s) for s in part])
               for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s[2] for s in ledger.local_spans()) == sorted(s.name for s in spans)
    assert len(ledger.ended_spans()) == 400


def test_gaps_are_the_time_no_leaf_covers_with_the_largest_and_the_span_before_it():
    ended, ledger = Ended(), SpanLedger()
    phase = ended("Model load", 1, 8)  # a parent: its self time (1-2, 3-5) is not explained by it
    for span in (ended("Config", 0, 1), phase, ended("Load weights", 2, 3, parent=phase),
                 ended("Profile", 5, 8, parent=phase)):
        ledger.record_local(span)
    # uncovered in [0, 10]: 1-2, 3-5, 8-10 -> 5 s; the largest (the earliest of equals) follows "Load weights"
    assert ledger.gaps(0, 10 * S) == (5 * S, 2 * S, "Load weights")


def test_a_detail_span_is_a_leaf_and_leaves_its_parent_one():
    ended, ledger = Ended(), SpanLedger()
    phase = ended("Load weights", 0, 10, phase="weights_load")
    [detail] = sorted(sc.DETAIL_PHASES)[:1]
    for span in (phase, ended("gc", 2, 3, parent=phase, phase=detail)):
        ledger.record_local(span)
    assert ledger.gaps(0, 10 * S) == (0, 0, None)  # the phase still covers its whole time


def test_pending_attributes_merge_per_phase_and_are_applied_once():
    ledger = SpanLedger()
    ledger.add_pending("weights_load", {"a": 1})
    ledger.add_pending("weights_load", {"b": 2, "a": 3})  # a later value for the same key wins
    ledger.add_pending("kv_cache", {"c": 4})
    assert ledger.pop_pending("weights_load") == {"a": 3, "b": 2}
    assert ledger.pop_pending("weights_load") == {}  # the next span of that phase gets none of them again
    assert ledger.pop_pending("kv_cache") == {"c": 4}
    assert ledger.pop_pending("never") == {}


def test_reset_leaves_a_new_empty_ledger_as_a_forked_child_needs():
    ended, ledger = Ended(), SpanLedger()
    ledger.record_local(ended("a", 0, 1))
    ledger.add_pending("weights_load", {"a": 1})
    ledger._lock.acquire()  # noqa: SLF001 - a lock held by a parent's thread at the fork
    ledger.reset_ledger()
    assert ledger.local_spans() == [] and ledger.ended_spans() == []  # a held lock would block these
    assert ledger.pop_pending("weights_load") == {}


def test_the_runtime_is_a_ledger():
    assert issubclass(Runtime, SpanLedger)
