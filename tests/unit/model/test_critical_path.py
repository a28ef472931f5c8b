"""The critical-path measure: at each instant, the non-waiting leaf spans of the innermost live process."""

from __future__ import annotations

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import report
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

S = 10**9


def span(sid, parent, name, start, end, kind="api_server", phase="x", **attrs):
    a = {sc.PHASE: phase, sc.PROCESS_KIND: kind, **attrs}
    return Span("t", sid, parent, name, int(start * S), int(end * S), a, {})


def start_with(*extra):
    """API server 0-10 s: imports 0-2, waits 2-9 on an EngineCore (process 2-8.5) that imports 2-4 and
    loads 4-8 with a nested span 4-6 (so 6-8 is the parent's self time); HTTP startup 9-10."""
    return Start(spans_of(*extra)).critical_path


def spans_of(*extra):
    """start_with's spans."""
    return [
        span("root", None, sc.ROOT_SPAN, 0, 10, phase="startup"),
        span("imp", "root", "Imports", 0, 2),
        span("wait", "root", "Engine handshake", 2, 9, **{sc.WAITING: True}),
        span("core", "wait", sc.ENGINE_CORE_PROCESS_SPAN, 2, 8.5, kind="engine_core", phase="engine_core_process"),
        span("cimp", "core", "Imports", 2, 4, kind="engine_core"),
        span("load", "core", "Load model", 4, 8, kind="engine_core"),
        span("w", "load", "Load weights", 4, 6, kind="engine_core"),
        span("http", "root", "HTTP startup", 9, 10),
        *extra,
    ]


def test_a_waiting_span_explains_nothing_and_a_parents_self_time_is_named():
    cp = start_with()
    # uncovered: 6-8.5 (Load model's own time after its child, then the EngineCore's time after it), and
    # 8.5-9 (the API server still waiting once its EngineCore is gone)
    assert cp.unexplained_s == pytest.approx(3.0)
    assert cp.share == pytest.approx(0.7)
    first, second = cp.gaps
    assert (first.kind, first.after, first.seconds) == ("engine_core", "Load weights", pytest.approx(2.5))
    assert (second.kind, second.after, second.seconds) == ("api_server", "Imports", pytest.approx(0.5))
    assert "2.50 s in EngineCore after 'Load weights'" in cp.headline()


def test_a_leaf_span_closes_the_gap_it_covers():
    cp = start_with(span("gc", "load", sc.GC_SPAN, 6, 8, kind="engine_core", phase="gc"))
    assert cp.unexplained_s == pytest.approx(1.0)
    assert sorted((g.kind, g.after) for g in cp.gaps) == [("api_server", "Imports"), ("engine_core", sc.GC_SPAN)]


def test_the_outer_process_counts_only_when_no_inner_process_is_live():
    # an API-server leaf while the EngineCore lives explains nothing: the EngineCore is doing the work
    cp = start_with(span("tok", "root", "Tokenizer init", 6, 8))
    assert cp.unexplained_s == pytest.approx(3.0)


def test_an_outer_collection_explains_an_idle_inner_process_and_nothing_else():
    """A worker between its startup calls runs no span of its own: a garbage collection of its EngineCore then is
    the instant's work. The same collection explains nothing while the worker runs a span of its own, and an outer
    phase span (not interpreter work) never stands in for an idle worker."""
    worker = [span("wk", "core", sc.WORKER_PROCESS_SPAN, 4, 8, kind="worker", phase="worker_process"),
              span("wimp", "wk", "Imports", 4, 5, kind="worker"),
              span("winit", "wk", "Worker init", 7, 8, kind="worker")]
    base = start_with(*worker)  # 5-7: the worker idle, the EngineCore's Load model/Load weights outer
    assert sorted((g.kind, round(g.seconds, 3)) for g in base.gaps) == [
        ("api_server", 0.5), ("engine_core", 0.5), ("worker", 2.0)]
    collected = start_with(*worker, span("gc", "load", sc.GC_SPAN, 5.5, 6.5, kind="engine_core", phase="gc"))
    assert sorted((g.kind, round(g.seconds, 3)) for g in collected.gaps) == [  # 5-5.5 and 6.5-7 left
        ("api_server", 0.5), ("engine_core", 0.5), ("worker", 0.5), ("worker", 0.5)]
    busy = start_with(*worker[:2], span("winit", "wk", "Worker init", 5, 8, kind="worker"),
                      span("dev", "winit", "Init device", 7, 8, kind="worker"),  # 5-7: Worker init's own time
                      span("gc", "load", sc.GC_SPAN, 5.5, 6.5, kind="engine_core", phase="gc"))
    assert sorted((g.kind, round(g.seconds, 3)) for g in busy.gaps) == [
        ("api_server", 0.5), ("engine_core", 0.5), ("worker", 2.0)]


def test_a_detail_span_covers_its_own_time_and_leaves_its_span_a_leaf():
    # a collection inside Load weights: Load weights is still a leaf (4-6 covered, not only the 0.5 s GC)
    gc = span("gc", "w", sc.GC_SPAN, 5, 5.5, kind="engine_core", phase="gc")
    assert start_with(gc).unexplained_s == pytest.approx(3.0)
    # the same rule in the report's union of every process's leaves (adding detail never lowers a share)
    imported = span("i", "http", sc.IMPORT_SPAN, 9.2, 9.4, phase="module_import")
    detailed, plain = Start(spans_of(gc, imported)), Start(spans_of())
    assert report.coverage(detailed.root, detailed.spans) == report.coverage(plain.root, plain.spans)
    # a structural child makes its parent's remaining time the parent's own: Load weights 4-6 minus 5-5.5
    part = span("p", "w", "Process weights after loading", 5, 5.5, kind="engine_core")
    assert start_with(part).unexplained_s == pytest.approx(4.5)


def test_detail_spans_cover_the_self_time_of_a_phase_with_structural_children():
    # Load model (4-8) has a structural child (4-6); PyTorch compile regions cover 6-7.5 of its own time
    region = span("r", "load", "backend_compile", 6, 7.5, kind="engine_core", phase="torch_compile_stage")
    inner = span("r2", "r", "GraphLowering.codegen", 6.5, 7, kind="engine_core", phase="torch_compile_stage")
    assert start_with(region, inner).unexplained_s == pytest.approx(1.5)


def data_parallel(engine1_gap: float = 0.0):
    """A launcher (0-12 s) spawns two EngineCores (1-8 and 1-9 s: imports, then work) and two API servers (1-11.5,
    1-12: imports 1-3, then their engine client waits for the engines inside one leaf span until 10, then HTTP);
    the launcher waits on them (API servers ready, 1-12). EngineCore 1 idles ``engine1_gap`` s before its end."""
    e1_work_end = 9 - engine1_gap
    return [
        span("root", None, sc.ROOT_SPAN, 0, 12, phase="startup"),
        span("imp", "root", "Imports", 0, 1),
        span("sp", "root", "Engine spawn", 1, 1.01),
        span("e0", "root", sc.ENGINE_CORE_PROCESS_SPAN, 1, 8, kind="engine_core", phase="engine_core_process",
             **{sc.DP_RANK: 0}),
        span("e0i", "e0", "Imports", 1, 4, kind="engine_core"),
        span("e0w", "e0", "Prepare model", 4, 8, kind="engine_core"),
        span("e1", "root", sc.ENGINE_CORE_PROCESS_SPAN, 1, 9, kind="engine_core", phase="engine_core_process",
             **{sc.DP_RANK: 1}),
        span("e1i", "e1", "Imports", 1, 4, kind="engine_core"),
        span("e1w", "e1", "Prepare model", 4, e1_work_end, kind="engine_core"),
        *[x for i, end in ((0, 11.5), (1, 12)) for x in (
            span(f"a{i}", "root", sc.API_SERVER_PROCESS_SPAN, 1, end, phase="api_server_process",
                 **{sc.API_SERVER_INDEX: i}),
            span(f"a{i}i", f"a{i}", "Imports", 1, 3),
            span(f"a{i}c", f"a{i}", "AsyncMPClient init", 3, 10),
            span(f"a{i}h", f"a{i}", "HTTP startup", 10, end))],
        span("wait", "root", sc.API_SERVERS_WAIT_SPAN, 1.01, 12, **{sc.WAITING: True}),
    ]


def test_data_parallel_the_slowest_engine_is_the_critical_path_and_is_named():
    st = Start(data_parallel())
    cp = st.critical_path
    # 1-9: an EngineCore works (the API servers' client spans wait on them, whatever they are named); EngineCore 1
    # ends last, so its work is what counts; 9-12: the API servers, the last one to be ready
    assert cp.share == pytest.approx(1.0)
    texts = [s.text() for s in cp.stragglers]
    assert "slowest of 2: EngineCore 1 was ready 1.00 s after EngineCore 0" in texts
    assert "slowest of 2: API server 1 was ready 0.50 s after API server 0" in texts
    assert sorted(ln.label.split(" (")[0] for ln in st.lanes) == [
        "API server", "API server 0", "API server 1", "EngineCore 0", "EngineCore 1"]


def test_data_parallel_a_gap_in_the_slowest_engine_is_not_hidden_by_a_faster_one():
    # EngineCore 1 idles 8-9 while EngineCore 0 is already done and the API servers' clients wait: named
    cp = Start(data_parallel(engine1_gap=1.0)).critical_path
    assert cp.unexplained_s == pytest.approx(1.0)
    assert (cp.gaps[0].lane.split(" (")[0], cp.gaps[0].after) == ("EngineCore 1", "Prepare model")


def test_a_rank_waiting_for_its_peers_or_its_front_end_is_explained_by_their_work():
    # EngineCore 1 (imports 1-4) then waits 4-5 at the DP rendezvous while EngineCore 0 still imports (1-5), then
    # both work 5-8/9; the launcher spawns the API servers 1.01-1.5 while EngineCore 0 waits for its init message
    spans = data_parallel()
    by = {s.span_id: s for s in spans}
    by["e1w"].start = int(5 * S)
    by["e0i"].end, by["e0w"].start = int(5 * S), int(5 * S)
    spans += [span("e1dp", "e1", "DP group init", 4, 5, kind="engine_core", phase="dp_group_init",
                   **{sc.WAITING: True})]
    assert Start(spans).critical_path.share == pytest.approx(1.0)
    # without the rendezvous span, EngineCore 1's 4-5 s is a gap of its own
    assert Start(data_parallel()[:0] + [s for s in spans if s.span_id != "e1dp"]).critical_path.unexplained_s == \
        pytest.approx(1.0)


def test_an_engine_waiting_for_its_front_end_is_explained_by_the_front_ends_work():
    # vLLM 0.26 with several API servers: an API server process answers the EngineCores' HELLO once it has imported;
    # EngineCore 1 waits for it 4-5 s (Front-end handshake) while API server 1 still imports
    spans = data_parallel()
    by = {s.span_id: s for s in spans}
    by["a1i"].end, by["a1c"].start = int(5 * S), int(5 * S)
    by["e1w"].start = int(5 * S)
    spans += [span("e1h", "e1", "Front-end handshake", 4, 5, kind="engine_core", phase="frontend_handshake",
                   **{sc.WAITING: True})]
    assert Start(spans).critical_path.share == pytest.approx(1.0)


def test_an_idle_worker_is_explained_by_a_busy_rank_of_its_engine_not_by_another_engines():
    """Tensor/pipeline parallel: rank 1 allocated its KV cache by 5 s, rank 0 allocates until 6; the executor's next
    call waits for both, so rank 1's idle 5-6 s is rank 0's work. A rank still inside a span of its own (a parent's
    self time) is not excused, nor is a rank whose busy peer belongs to another EngineCore."""
    def ranks(owner="core", r1_parent=False):  # rank 1 ends last (8 s, rank 0 7.9 s): the one the start waits for
        return [span("wk0", owner, sc.WORKER_PROCESS_SPAN, 4, 7.9, kind="worker", phase="worker_process"),
                span("a0", "wk0", "Allocate KV cache", 4, 6, kind="worker"),
                span("c0", "wk0", "Compile or warm up model", 6, 7.9, kind="worker"),
                span("wk1", "core", sc.WORKER_PROCESS_SPAN, 4, 8, kind="worker", phase="worker_process"),
                span("a1", "p1" if r1_parent else "wk1", "Allocate KV cache", 4, 5, kind="worker"),
                span("c1", "wk1", "Compile or warm up model", 6, 8, kind="worker"),
                *([span("p1", "wk1", "Worker init", 4, 6, kind="worker")] if r1_parent else [])]
    base = start_with(*ranks())
    assert not [g for g in base.gaps if g.kind == "worker"]
    selfish = start_with(*ranks(r1_parent=True))  # rank 1 inside Worker init 5-6 s, with no leaf: its own time
    assert [(g.after, round(g.seconds, 3)) for g in selfish.gaps if g.kind == "worker"] == [("Allocate KV cache", 1.0)]
    other = start_with(span("core2", "wait", sc.ENGINE_CORE_PROCESS_SPAN, 2, 8.5, kind="engine_core",
                            phase="engine_core_process"), *ranks(owner="core2"))
    assert [round(g.seconds, 3) for g in other.gaps if g.kind == "worker"] == [1.0]


def test_the_rank_that_ended_a_phase_last_is_named_with_how_long_the_others_waited():
    ranks = [span("wk0", "core", sc.WORKER_PROCESS_SPAN, 4, 7.9, kind="worker", phase="worker_process",
                  **{sc.WORKER_RANK: 0}),
             span("l0", "wk0", "Load model", 4, 4.5, kind="worker"),
             span("w0", "l0", "Load weights", 4, 4.5, kind="worker"),
             span("a0", "wk0", "Allocate KV cache", 4.5, 6, kind="worker"),
             span("g0", "a0", sc.GC_SPAN, 5, 5.5, kind="worker", phase="gc"),
             span("wk1", "core", sc.WORKER_PROCESS_SPAN, 4, 8, kind="worker", phase="worker_process",
                  **{sc.WORKER_RANK: 1}),
             span("l1", "wk1", "Load model", 4, 4.52, kind="worker"),
             span("w1", "l1", "Load weights", 4, 4.52, kind="worker"),  # 0.02 s apart: not a wait worth a line
             span("a1", "wk1", "Allocate KV cache", 4.52, 5, kind="worker")]
    cp = start_with(*ranks)
    (w,) = cp.rank_waits  # the leaves only (Load model would repeat Load weights), detail spans never
    assert (w.phase, w.lane.split(" (")[0], w.of) == ("Allocate KV cache", "worker 0", 2)
    assert (w.waited_s, w.slowest_s, w.fastest_s) == (pytest.approx(1.0), pytest.approx(1.5), pytest.approx(0.48))
    assert w.text() == ("ranks: Allocate KV cache ended last on worker 0 of 2, 1.00 s after the first (took 1.50 s; "
                        "the quickest rank 0.48 s)")
    assert start_with().rank_waits == []  # one worker (or none): nothing to compare


def test_the_executors_own_work_explains_its_idle_workers_but_an_rpc_around_their_work_does_not():
    """Between two calls to its workers the EngineCore works alone (the executor's handshake with their message
    queues): its leaf span there overlaps no worker span, so it explains the idle workers' instant. A leaf around
    an RPC (it overlaps the worker's spans) never does: the worker's own unnamed time inside it stays a gap."""
    worker = [span("wk", "core", sc.WORKER_PROCESS_SPAN, 4, 8, kind="worker", phase="worker_process"),
              span("wimp", "wk", "Imports", 4, 5, kind="worker"),
              span("winit", "wk", "Worker init", 7, 8, kind="worker")]
    idle = start_with(*worker)  # 5-7: the worker idle; the EngineCore's Load model/Load weights overlap its imports
    assert ("worker", 2.0) in [(g.kind, round(g.seconds, 3)) for g in idle.gaps]
    hand = start_with(*worker, span("hs", "load", "Worker handshake", 6, 7, kind="engine_core"))
    assert ("worker", 1.0) in [(g.kind, round(g.seconds, 3)) for g in hand.gaps]  # 5-6 left: Load weights' RPC
    rpc = start_with(*worker, span("hs", "load", "Worker handshake", 4.5, 7, kind="engine_core"))  # meets wimp
    assert ("worker", 2.0) in [(g.kind, round(g.seconds, 3)) for g in rpc.gaps]


def test_the_rank_waits_become_one_metric_series_per_phase():
    """vllm.startup.rank_wait: the start's rank waits, one series per phase, valued by how long the others waited."""
    from vllm_otel_startup.agent.export.observations import rank_wait_observations

    ranks = [span("wk0", "core", sc.WORKER_PROCESS_SPAN, 4, 7.9, kind="worker", phase="worker_process",
                  **{sc.WORKER_RANK: 0}),
             span("a0", "wk0", "Allocate KV cache", 4.5, 6, kind="worker", phase="kv_cache_allocate"),
             span("wk1", "core", sc.WORKER_PROCESS_SPAN, 4, 8, kind="worker", phase="worker_process",
                  **{sc.WORKER_RANK: 1}),
             span("a1", "wk1", "Allocate KV cache", 4.5, 5, kind="worker", phase="kv_cache_allocate")]
    [o] = rank_wait_observations(spans_of(*ranks), {"k8s.pod.name": "p"})
    assert o.metric == "vllm.startup.rank_wait" and o.value == pytest.approx(1.0)
    assert o.labels == {"k8s.pod.name": "p", sc.PHASE: "kv_cache_allocate"}
    assert rank_wait_observations(spans_of(*ranks[:2]), {}) == []  # one worker: nothing to compare
