"""The fleet's questions about multi-GPU starts, answered by the dashboards' own queries in a real VictoriaMetrics
(with vmalert evaluating the shipped recording rules) from six real H200 starts of one 8B shape (tests/data/starts/
gpu, issue 26): TP2 cold, TP2 warm (it loads its AOT artifact), TP2 with 8 capture sizes (a new compile key), PP2,
DP2 and TP4. Each start's startup metrics are what the agent's code derives from its recorded spans
(observations.py, per process, as each process records them), replayed as test_gpu_queries replays the H100 start's
(VictoriaMetrics storing OTLP with -opentelemetry.usePrometheusNaming); each start gets the pod identity the downward
API would have given it (the only thing not recorded)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import test_gpu_queries as gq
import test_queries_on_stores as base

from dashboards import startup_queries as sq
from vllm_otel_startup import semconv as sc

GPU = Path(__file__).resolve().parents[1] / "data" / "starts" / "gpu"
STARTS = ("h200x2-llama8b-tp2-cold", "h200x2-llama8b-tp2-warm", "h200x2-llama8b-tp2-warm-sizes8",
          "h200x2-llama8b-pp2-cold", "h200x2-llama8b-dp2-after-pp2", "h200x4-llama8b-tp4-cold")


def identity(name: str) -> dict[str, str]:
    return {"k8s_cluster_name": "h200-cluster", "k8s_namespace_name": "gpu", "k8s_pod_name": name,
            "k8s_node_name": name.split("-")[0]}


@pytest.fixture(scope="module")
def victoriametrics(tmp_path_factory) -> Iterator[str]:
    series = (x for name in STARTS for x in gq.startup_samples(GPU / f"{name}.jsonl.gz", identity(name)))
    yield from gq.replayed(series, tmp_path_factory, "multi-gpu")


def test_the_fleets_compile_hit_ratio_counts_the_warm_starts_aot_loads(victoriametrics):
    """The warm TP2 start compiled nothing: each of its two ranks loaded its AOT artifact, two hits. Every other
    start compiled on each of its ranks (a new key or an empty root): 2 + 2 + 2 + 2 (DP2: one rank per EngineCore)
    + 4 misses. The fleet panel's ratio is 2 of 14."""
    (row,) = base._query(victoriametrics, sq.compile_hit_ratio([], "1h"))
    assert float(row["value"][1]) == pytest.approx(2 / 14)
    (warm,) = base._query(victoriametrics, sq.compile_hit_ratio(['k8s_pod_name="h200x2-llama8b-tp2-warm"'], "1h"))
    assert float(warm["value"][1]) == 1.0


def test_the_fleet_panel_shows_where_ranks_waited_for_a_rank(victoriametrics):
    """vllm.startup.rank_wait by phase, longest over the fleet: the process group, where the TP4 start's ranks
    waited 2.6 s for the last to arrive (its imports ended last), is among them."""
    rows = {r["metric"][sc.prom_label(sc.PHASE)]: float(r["value"][1])
            for r in base._query(victoriametrics, sq.rank_waits([], "1h"))}
    assert rows.get("process_group_init", 0) > 2.0, rows
