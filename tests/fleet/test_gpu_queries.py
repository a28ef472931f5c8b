"""Every dashboard query a GPU start can feed, on a real GPU start's series in a real VictoriaMetrics.

The series are the last point of every resource metric the recorded H100 start (tests/data/starts/gpu: vLLM
0.26.0, 8B-shaped, cold) exported over OTLP, as its independent receiver stored them, and its startup metrics as
the agent's code derives them from that start's recorded spans (observations.py, per process as each process
records them: the recording predates one series per phase and start); they are imported the way
VictoriaMetrics stores OTLP with -opentelemetry.usePrometheusNaming (the OTLP name by semconv.prom_name,
attributes and resource attributes as labels). That VM had no Kubernetes: the replay adds the pod identity
the downward API would have given it (IDENTITY), which is the only thing not recorded. vmalert evaluates the
mixin's recording rules over it, as over the synthetic start (test_queries_on_stores.py).
"""

from __future__ import annotations

import gzip
import json
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import fleet_tools
import pytest
import test_queries_on_stores as base

from dashboards import alerts as al
from dashboards import queries
from vllm_otel_startup import semconv as sc

RECORDED = (Path(__file__).resolve().parents[1] / "data" / "starts" / "gpu"
            / "h100-llama8b-compiled-cold.metrics.jsonl.gz")
SPANS = RECORDED.with_name("h100-llama8b-compiled-cold.jsonl.gz")
IDENTITY = {"k8s_cluster_name": "gpu-cluster", "k8s_namespace_name": "gpu", "k8s_pod_name": "vllm-h100-0",
            "k8s_node_name": "h100-node"}
FED = frozenset({al.GPU, al.COMPILE, al.COMPILE_MISS, queries.CGROUP})  # what this cold GPU start feeds


def _labels(row: dict, identity: dict[str, str]) -> dict[str, str]:
    out = {sc.prom_label(k): str(v) for k, v in {**row["resource"], **row["attrs"]}.items()}
    return {**out, **identity}


def _fmt(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def startup_samples(spans_path: Path, identity: dict[str, str]) -> Iterator[tuple[str, dict[str, str], float]]:
    """(Prometheus name, labels, value) of a recorded start's startup metrics, as each of its processes records them
    from its own spans (the start's own series by the process that holds its root), with the pod ``identity``."""
    from vllm_otel_startup.agent.export.observations import fleet_labels, span_observations, start_observations
    from vllm_otel_startup.cli import sources

    spans = sources.one(str(spans_path)).spans
    fleet = fleet_labels(next(s for s in spans if s.attrs.get(sc.PHASE) == "startup").attrs)
    by_process: dict[str, list] = {}
    for s in spans:
        by_process.setdefault(str(s.resource["service.instance.id"]), []).append(s)
    for own in by_process.values():
        resource = {k: v for k, v in own[0].resource.items() if not isinstance(v, list)}
        observations = span_observations(own, fleet)
        if any(s.attrs.get(sc.PHASE) == "startup" for s in own):  # the root's process (of several API servers)
            observations += start_observations(spans, fleet)
        for o in observations:
            yield sc.prom_name(o.metric), _labels({"resource": resource, "attrs": o.labels}, identity), o.value


def samples() -> Iterator[tuple[str, dict[str, str], float]]:
    """(Prometheus name, labels, value) of every recorded resource series and of the start's startup metrics."""
    with gzip.open(RECORDED, "rt") as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        if row["name"] in sc.RESOURCE_METRICS:
            yield sc.prom_name(row["name"]), _labels(row, IDENTITY), float(row["value"])
    yield from startup_samples(SPANS, IDENTITY)


def replayed(series: Iterable[tuple[str, dict[str, str], float]], tmp_path_factory, tag: str) -> Iterator[str]:
    """A real VictoriaMetrics holding ``series`` (each over the last 5 minutes, every 15 s) with vmalert's
    recordings of them in: yields its URL."""
    work, port = tmp_path_factory.mktemp(f"vm-{tag}"), base._free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [fleet_tools.tool("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={work}",
           "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s"]
    for _ in base._serve(cmd, f"{url}/health"):
        now_ms = int(time.time() * 1000)
        body = "".join(f"{n}{{{_fmt(lb)}}} {v} {t}\n" for n, lb, v in series
                       for t in range(now_ms - 300_000, now_ms + 1, 15_000)).encode()
        urllib.request.urlopen(urllib.request.Request(f"{url}/api/v1/import/prometheus", data=body), timeout=10)
        base._get(f"{url}/internal/force_flush")
        for _ in base.vmalert(url, tmp_path_factory.mktemp(f"vmalert-{tag}")):
            yield url


@pytest.fixture(scope="module")
def victoriametrics(tmp_path_factory) -> Iterator[str]:
    yield from replayed(samples(), tmp_path_factory, "gpu")


GPU_FED = [q for q in queries.all_queries() if q.needs <= FED and queries.OTLP in q.paths]


def test_the_gpu_queries_are_among_those_run():
    assert sum(al.GPU in q.needs for q in GPU_FED) >= 3


@pytest.mark.parametrize("query", GPU_FED, ids=lambda q: q.source)
def test_query_answers_from_a_real_gpu_starts_series(query, victoriametrics):
    base._assert_answers(victoriametrics, query)


def test_the_h100_is_what_the_gpu_panels_show(victoriametrics):
    (used,) = base._query(victoriametrics, next(q.expr for q in GPU_FED if q.source.endswith("GPU memory/A")))
    (limit,) = base._query(victoriametrics, next(q.expr for q in GPU_FED if q.source.endswith("GPU memory/B")))
    assert used["metric"]["hw_name"] == "NVIDIA H100 80GB HBM3"
    assert 60e9 < float(used["value"][1]) < float(limit["value"][1]) < 90e9  # ~0.85 of the card after the start
