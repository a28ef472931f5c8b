"""A fleet of simulated starts made from recorded real ones, delivered the two ways a fleet delivers them.

Each simulated start is a recorded start (tests/data/starts: CPU corpus, GPU, a failed one) given a fleet
identity — cluster, namespace, pod, node, model name, vLLM version — a fresh trace id and process ids, and its
phase durations scaled by one log-normal factor (starts of one kind differ by tens of percent). Its metrics are
then produced by the agent's own code, not by a copy of the series shapes:

- OTLP (``otlp_request``): each process of the start gets an OpenTelemetry SDK MeterProvider with the process's
  recorded resource (pid, service.instance.id and k8s.* replaced), the agent's ``StartupRecorder`` records the
  observations ``ready.py`` records in that process (its own spans; the API server also the whole-start ones),
  ``register_resource_instruments`` adds the resource instruments, and the SDK's OTLP encoder writes the request
  VictoriaMetrics' OTLP endpoint receives. Only the data points' timestamps are rewritten (simulated time).
- Scrape (``scrape_text``): the API server's ``StartupCollector`` (prometheus.py) over the whole start's spans, in
  prometheus-client's text exposition, with the target labels deploy/'s relabelling gives a pod, timestamped
  as Prometheus stores ``samples`` scrapes. A failed start has no /metrics to scrape (the server is gone).

``samples``: each start's series get that many points, ``interval_s`` apart, after its ready time (a pod keeps
exporting and serving the same values as long as it lives; this bounds the simulation, see docs/results.md).
"""

from __future__ import annotations

import dataclasses
import json
import random
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export.observations import fleet_labels, span_observations, start_observations
from vllm_otel_startup.model.spanmodel import Span

STARTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "starts"
API_SERVER = "api_server"
MODELS = [f"{org}/{name}" for org in ("meta-llama", "Qwen", "mistralai", "google", "ibm-granite")
          for name in ("small-1b", "chat-8b", "coder-14b", "instruct-32b", "large-70b")]
VERSIONS = ("0.26.0", "0.28.1", "0.30.2", "0.31.0", "0.32.0")
SCALES = (0.7, 0.85, 1.0, 1.2, 1.5)  # phase durations x one of these per start (quintiles of lognormal(0, 0.3))
K8S = ("k8s.cluster.name", "k8s.namespace.name", "k8s.pod.name", "k8s.node.name")


@dataclass(frozen=True)
class Template:
    """One recorded start: its spans, grouped by process (service.instance.id), and what it stands for."""

    name: str
    spans: tuple[Span, ...]
    outcome: str  # ready | failed
    gpu: bool
    warm: bool


@dataclass(frozen=True)
class SimStart:
    index: int
    template: Template
    ready_s: int  # unix seconds of its ready point (or its failure)
    cluster: str
    namespace: str
    pod: str
    node: str
    model: str
    version: str
    scale: float  # phase durations x this (one of SCALES)

    @property
    def identity(self) -> dict[str, str]:
        return dict(zip(K8S, (self.cluster, self.namespace, self.pod, self.node), strict=True))


def _is_root(own: list[Span]) -> bool:
    """The process whose span is the start's root records the whole start (with several API servers: the launcher,
    not each API server)."""
    return any(x.attrs.get(sc.PHASE) == "startup" for x in own)


# Issue 18's series budget of one start: 100 per EngineCore (its API server and one worker included), and 40 for
# each process beyond those (a second API server, each tensor / pipeline rank's worker: its resource readings and
# phases, 25-36 series measured: TP=4 on 4 H200s 175 over OTLP, two API servers on CPU 98-103).
SERIES_PER_ENGINE, SERIES_PER_EXTRA_PROCESS = 100, 40


def series_budget(engines: int, workers: int, api_servers: int) -> int:
    """The most series a start of this layout may cost a store."""
    engines = max(1, engines)
    extra = max(0, workers - engines) + max(0, api_servers - 1)
    return SERIES_PER_ENGINE * engines + SERIES_PER_EXTRA_PROCESS * extra


def templates(root: Path = STARTS) -> list[Template]:
    """Every recorded start under ``root`` (corpus, dev, gpu)."""
    from vllm_otel_startup.cli import sources

    out = []
    paths = [*root.glob("corpus/*.jsonl.gz"), *root.glob("dev/*.jsonl.gz"), *root.glob("gpu/*-warm.jsonl.gz"),
             *root.glob("gpu/*-cold.jsonl.gz")]
    for path in sorted(paths):
        st = sources.one(str(path))
        outcome = str(st.root.attrs.get(sc.OUTCOME, "failed"))
        out.append(Template(f"{path.parent.name}/{path.name.removesuffix('.jsonl.gz')}", tuple(st.spans), outcome,
                            gpu=path.parent.name == "gpu", warm=path.name.endswith("-warm.jsonl.gz")))
    return out


def plan(n: int, templates_: list[Template], *, end_s: int, window_s: int = 7 * 86400, seed: int = 18,
         failed_share: float = 0.02, gpu_share: float = 0.5, warm_share: float = 0.7) -> list[SimStart]:
    """``n`` starts spread uniformly over ``window_s`` up to ``end_s``, time-ordered: every start a new pod (a
    Deployment's rollout, rescheduling or autoscaling: a fresh pod name and IP, the worst case for series churn),
    n / (window in days) deployments restarting about daily, each with its model and vLLM version (25 models, 5
    versions), 3 clusters, 4 namespaces, a node per 8 deployments; ``failed_share`` fail, ``gpu_share`` are GPU
    starts, ``warm_share`` of the others warm (a cache on the node or a volume)."""
    rnd = random.Random(seed)
    failed = [t for t in templates_ if t.outcome != "ready"]
    ready = [t for t in templates_ if t.outcome == "ready"]
    pools = {(g, w): [t for t in ready if t.gpu == g and t.warm == w] for g in (True, False) for w in (True, False)}
    deployments = max(1, round(n / max(window_s / 86400, 1)))
    out = []
    for i in range(n):
        if failed and rnd.random() < failed_share:
            t = rnd.choice(failed)
        else:
            g = rnd.random() < gpu_share
            w = rnd.random() < warm_share
            t = rnd.choice(pools[(g, w)] or ready)
        d = rnd.randrange(deployments)
        out.append(SimStart(i, t, end_s - rnd.randrange(window_s), f"cluster-{d % 3}", f"team-{d % 4}",
                            f"vllm-{d:05d}-{rnd.getrandbits(40):010x}", f"node-{d // 8:05d}",
                            MODELS[d % len(MODELS)], VERSIONS[(d // len(MODELS)) % len(VERSIONS)],
                            rnd.choice(SCALES)))
    return sorted(out, key=lambda s: s.ready_s)


def spans_of(s: SimStart) -> list[Span]:
    """The template's spans as this start's: scaled durations ending at its ready time, a fresh trace id, fresh
    process identities (pid, service.instance.id) per recorded process, its Kubernetes identity."""
    rnd = random.Random(s.index)
    spans = s.template.spans
    t0, t1 = min(x.start for x in spans), max(x.end for x in spans)
    shift = s.ready_s * 10**9 - (t0 + int((t1 - t0) * s.scale))
    trace_id = f"{rnd.getrandbits(128):032x}"
    resources: dict[str, dict[str, Any]] = {}
    out = []
    for x in spans:
        key = str(x.resource.get("service.instance.id") or x.resource.get("process.pid"))
        if key not in resources:
            resources[key] = {**x.resource, "service.instance.id": str(uuid.UUID(int=rnd.getrandbits(128))),
                              "process.pid": rnd.randrange(100, 4_000_000), "host.name": s.node, **s.identity}
        start = t0 + int((x.start - t0) * s.scale) + shift
        end = t0 + int((x.end - t0) * s.scale) + shift
        out.append(dataclasses.replace(x, trace_id=trace_id, start=start, end=end, resource=resources[key],
                                       children=[]))
    return out


def fleet_of(s: SimStart, spans: list[Span]) -> dict[str, str]:
    root = next((x for x in spans if x.attrs.get(sc.PHASE) == "startup"), None)
    facts = {**(root.attrs if root else {}), sc.MODEL: s.model, sc.VLLM_VERSION: s.version}
    return fleet_labels(facts)


def processes(spans: list[Span]) -> dict[str, list[Span]]:
    """service.instance.id -> that process's spans, the API server's first."""
    by: dict[str, list[Span]] = {}
    for x in spans:
        by.setdefault(x.resource["service.instance.id"], []).append(x)
    return dict(sorted(by.items(), key=lambda kv: kv[1][0].resource.get(sc.PROCESS_KIND) != API_SERVER))


# ---- OTLP ------------------------------------------------------------------------------------------------------
_GPU = [({"hw.id": "GPU-0", "hw.name": "NVIDIA H100 80GB HBM3", "hw.vendor": "nvidia"},
         {"mem_used": 68e9, "mem_total": 85e9, "util": 0.0, "power": 120.0})]


def _sampler(kind: str, gpu: bool) -> Any:
    """What ``register_resource_instruments`` reads from the agent's sampler: host-level readings in the API
    server only (as runtime.py starts it), a GPU where the template had one."""
    return SimpleNamespace(stopped=False, host=kind == API_SERVER, throttled0=0.0, pcie={},
                           gpu=_GPU if gpu and kind == API_SERVER else [],
                           take_peaks=lambda: {"process": 1.0, "tree": 1.5, "system": 1.9})


def otlp_resource_metrics(s: SimStart, spans: list[Span], *, resource_keep: Iterable[str] | None = None
                          ) -> list[Any]:
    """The start's OTLP ResourceMetrics (protobuf), one per process, as the agent records them at the ready
    point. ``resource_keep``: only these resource attributes (a variant that keeps process identity off)."""
    from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource

    from vllm_otel_startup.agent.export.otel_metrics import StartupRecorder, meter, register_resource_instruments

    fleet = fleet_of(s, spans)
    keep = set(resource_keep) if resource_keep is not None else None
    out = []
    for own in processes(spans).values():
        res = {k: (json.dumps(v) if isinstance(v, list) else v) for k, v in own[0].resource.items()
               if keep is None or k in keep}
        kind = str(own[0].resource.get(sc.PROCESS_KIND))
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], resource=Resource(res))
        m = meter(provider)
        register_resource_instruments(m, _sampler(kind, s.template.gpu))
        observations = span_observations(own, fleet)
        if _is_root(own):
            observations += start_observations(spans, fleet)
        StartupRecorder(m).record(observations)
        data = reader.get_metrics_data()
        provider.shutdown()
        if data is not None:
            out.extend(encode_metrics(data).resource_metrics)
    return out


def _points(metric: Any) -> Any:
    for field in ("sum", "gauge", "histogram", "exponential_histogram"):
        if metric.HasField(field):
            return getattr(metric, field).data_points
    return []


def stamp(resource_metrics: list[Any], times_ns: list[int]) -> None:
    """Every data point repeated at ``times_ns`` (cumulative values unchanged: nothing new observed)."""
    for rm in resource_metrics:
        for scope in rm.scope_metrics:
            for metric in scope.metrics:
                points = _points(metric)
                first = list(points)
                del points[:]
                for t in times_ns:
                    for p in first:
                        q = points.add()
                        q.CopyFrom(p)
                        q.ClearField("exemplars")
                        q.time_unix_nano = t
                        if hasattr(q, "start_time_unix_nano"):
                            q.start_time_unix_nano = times_ns[0] - 1_000_000_000


_made: dict[tuple, tuple[list[bytes], list[dict[str, Any]], str]] = {}


def reused_resource_metrics(s: SimStart, spans: list[Span], *, resource_keep: Iterable[str] | None = None
                            ) -> list[Any]:
    """``otlp_resource_metrics``, made once per (template, model, version, scale): another start with
    those gets the same points, with its own identity written over the first one's — the resources (pid,
    service.instance.id, pod, node) and the trace id label — which is all that differs between them (the
    observations depend on durations, fleet labels and span attributes only). Exact, and ~10x cheaper."""
    from opentelemetry.exporter.otlp.proto.common._internal import _encode_attributes
    from opentelemetry.proto.metrics.v1.metrics_pb2 import ResourceMetrics

    keep = tuple(resource_keep) if resource_keep is not None else None
    key = (s.template.name, s.model, s.version, s.scale, keep)
    resources = [own[0].resource for own in processes(spans).values()]
    if key not in _made:
        made = otlp_resource_metrics(s, spans, resource_keep=keep)
        if len(made) != len(resources):  # a process without metrics: no reuse for this one
            return made
        _made[key] = ([rm.SerializeToString() for rm in made], resources, spans[0].trace_id)
        return made
    blobs, first, first_trace = _made[key]
    out = []
    for blob, res, old in zip(blobs, resources, first, strict=True):
        rm = ResourceMetrics.FromString(blob)
        attrs = {k: (json.dumps(v) if isinstance(v, list) else v) for k, v in res.items()
                 if keep is None or k in keep}
        if {k for k in attrs} != {k for k in old if keep is None or k in keep}:
            raise ValueError("a reused start's resource has other attributes")
        del rm.resource.attributes[:]
        rm.resource.attributes.extend(_encode_attributes(attrs))
        for metric in (m for sc_ in rm.scope_metrics for m in sc_.metrics):
            for p in _points(metric):
                for kv in p.attributes:
                    if kv.key == sc.TRACE_ID and kv.value.string_value == first_trace:
                        kv.value.string_value = spans[0].trace_id
        out.append(rm)
    return out


def otlp_request(starts: Iterable[SimStart], *, samples: int, interval_s: int,
                 resource_keep: Iterable[str] | None = None, reuse: bool = True) -> bytes:
    """One ExportMetricsServiceRequest (serialized) holding every process of ``starts``; ``reuse``: through
    ``reused_resource_metrics`` (the same request, made faster)."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    make = reused_resource_metrics if reuse else otlp_resource_metrics
    req = ExportMetricsServiceRequest()
    for s in starts:
        rms = make(s, spans_of(s), resource_keep=resource_keep)
        stamp(rms, [(s.ready_s + k * interval_s) * 10**9 for k in range(samples)])
        req.resource_metrics.extend(rms)
    return req.SerializeToString()


# ---- scrape ----------------------------------------------------------------------------------------------------
def target_labels(s: SimStart) -> dict[str, str]:
    """The labels Prometheus adds to a scraped pod (deploy/ relabels the pod's metadata to k8s_*)."""
    return {"job": "vllm", "instance": f"10.{s.index // 65536 % 256}.{s.index // 256 % 256}.{s.index % 256}:8000",
            **{sc.prom_label(k): v for k, v in s.identity.items()}}


def exposition(s: SimStart, spans: list[Span]) -> str:
    """What the API server's GET /metrics serves of the start (prometheus-client text format 0.0.4)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from vllm_otel_startup.agent.export.prometheus import StartupCollector

    registry = CollectorRegistry(auto_describe=False)
    collector = StartupCollector(lambda: spans, fleet_of(s, spans))
    registry.register(collector)
    return generate_latest(registry).decode()


def scrape_samples(s: SimStart, *, samples: int, interval_s: int) -> Iterator[tuple[str, str]]:
    """(metric name, OpenMetrics sample line with a timestamp in s) of ``samples`` scrapes of the start's /metrics;
    nothing for a failed start."""
    if s.template.outcome != "ready":
        return
    extra = ",".join(f'{k}="{v}"' for k, v in target_labels(s).items())
    for line in exposition(s, spans_of(s)).splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, _, rest = series.partition("{")
        body = f"{name}{{{rest[:-1]},{extra}}}" if rest else f"{name}{{{extra}}}"
        for k in range(samples):
            yield name, f"{body} {value} {s.ready_s + k * interval_s}"


def openmetrics_file(starts: Iterable[SimStart], path: Path, *, samples: int, interval_s: int) -> int:
    """Write the scrapes of ``starts`` for promtool's backfill (series of one metric name together, ``# EOF``);
    the number of sample lines."""
    by_name: dict[str, list[str]] = {}
    for s in starts:
        for name, line in scrape_samples(s, samples=samples, interval_s=interval_s):
            by_name.setdefault(name, []).append(line)
    n = 0
    with open(path, "w") as f:
        for lines in by_name.values():
            f.write("\n".join(lines))
            f.write("\n")
            n += len(lines)
        f.write("# EOF\n")
    return n


# ---- what the recording rules record over such a fleet (dashboards/recording.py) ---------------------------------
_SOURCES: dict[tuple, list[tuple[str, dict[str, str], float]]] = {}


def source_series(s: SimStart) -> list[tuple[str, dict[str, str], float]]:
    """(Prometheus name, labels, value) of the start's startup series as VictoriaMetrics holds them over OTLP,
    with the labels a recording can keep: the metric's own and fleet labels, the process kind, cluster and
    namespace (pod, node, pid, instance id, ...: never kept by a recording, left out here)."""
    key = (s.template.name, s.model, s.version, s.scale)
    if key not in _SOURCES:
        spans = spans_of(s)
        fleet = fleet_of(s, spans)
        out = []
        for own in processes(spans).values():
            kind = str(own[0].resource.get(sc.PROCESS_KIND))
            observations = span_observations(own, fleet)
            if _is_root(own):
                observations += start_observations(spans, fleet)
            for o in observations:
                labels = {sc.prom_label(k): v for k, v in {sc.PROCESS_KIND: kind, **o.labels}.items()
                          if k != sc.TRACE_ID}
                out.append((sc.prom_name(o.metric), labels, float(o.value)))
        _SOURCES[key] = out
    extra = {sc.prom_label(K8S[0]): s.cluster, sc.prom_label(K8S[1]): s.namespace}
    return [(name, {**labels, **extra}, value) for name, labels, value in _SOURCES[key]]


def _quantile(phi: float, values: list[float]) -> float:
    """PromQL's quantile(): linear interpolation between the closest ranks."""
    v = sorted(values)
    rank = phi * (len(v) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (rank - lo)


def recorded_series(starts: list[SimStart], recording: Any, *, interval_s: int, first_s: int, last_s: int
                    ) -> Iterator[tuple[dict[str, str], list[int], list[float]]]:
    """(labels with __name__, timestamps in s, values) of what ``recording`` (a dashboards.recording.Recording:
    ``op`` by its ``keep`` labels over the series new in its window) records when evaluated every ``interval_s``
    from ``first_s`` to ``last_s`` over these starts' series (each first seen at its start's ready time), as
    vmalert or Prometheus would write it. A start's series is new at an evaluation at ``t`` when its ready time
    is in (t - window, t]."""
    import numpy as np

    window = {"m": 60, "h": 3600, "d": 86400}[recording.window[-1]] * int(recording.window[:-1])
    evals = np.arange(first_s - first_s % interval_s + interval_s, last_s + 1, interval_s)
    n = len(evals)
    from array import array

    by_key: dict[tuple, tuple[array, array]] = {}  # compact: ~50 series per start at 100,000 starts
    bounds = [(b, float(b)) for b in recording.bounds]
    for s in starts:
        for name, labels, value in source_series(s):
            if name != recording.source:
                continue
            key = tuple(labels.get(k, "") for k in recording.keep)
            if recording.op == "bucket":  # every bound of the group, 0 where the value is over it
                for b, bound in bounds:
                    readies, vals = by_key.setdefault((*key, b), (array("q"), array("d")))
                    readies.append(s.ready_s)
                    vals.append(1.0 if value <= bound else 0.0)
            else:
                readies, vals = by_key.setdefault(key, (array("q"), array("d")))
                readies.append(s.ready_s)
                vals.append(1.0 if recording.op == "count" else value)
    names = (*recording.keep, "le") if recording.op == "bucket" else recording.keep
    for key, (readies, vals) in by_key.items():
        labels = {"__name__": recording.record, **{k: v for k, v in zip(names, key, strict=True) if v}}
        r = np.asarray(readies, dtype=np.int64)
        if recording.op == "p95":
            order = np.argsort(r, kind="stable")
            r, x = r[order], np.asarray(vals)[order]
            lo = np.searchsorted(r, evals - window, side="right")
            hi = np.searchsorted(r, evals, side="right")
            ts, out = [], []
            for k in np.nonzero(hi > lo)[0]:
                ts.append(int(evals[k]))
                out.append(_quantile(0.95, list(x[lo[k]:hi[k]])))
            yield labels, ts, out
            continue
        k0 = np.searchsorted(evals, r, side="left")  # first evaluation at or after the ready time
        k1 = np.searchsorted(evals, r + window, side="left")  # first one the start is out of the window again
        w = np.asarray(vals)
        total = np.cumsum(np.bincount(k0, w, n + 1) - np.bincount(k1, w, n + 1))[:n]
        present = np.cumsum(np.bincount(k0, None, n + 1) - np.bincount(k1, None, n + 1))[:n] > 0
        idx = np.nonzero(present)[0]
        yield labels, [int(t) for t in evals[idx]], [float(v) for v in total[idx]]
