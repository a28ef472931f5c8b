"""What one start's spans say, in one place: the linked tree, the processes, each phase's time and the
causes (cache hits, weights source and speed, graphs, resources). Everything the summary, the report,
advice, compare, predict and the pictures show is read here, and nothing else reads span attributes.

Stdlib only, no I/O: the printed-at-ready summary imports it inside the server process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.argv import model_from_argv
from vllm_otel_startup.model.formatting import human_bytes, seconds
from vllm_otel_startup.model.intervals import union_length
from vllm_otel_startup.model.spanmodel import Span

__all__ = ["KIND_LABEL", "Facts", "Lane", "cause_labels", "facts", "find_root", "folds_into", "human_bytes",
           "key_causes", "kind_of", "lanes", "leaves", "link", "no_aot_artifact_yet", "phase_of", "rank_of",
           "resource_labels", "seconds"]

PROCESS_PHASES = ("startup", "engine_core_process", "worker_process", "api_server_process")
KIND_LABEL = {"api_server": "API server", "engine_core": "EngineCore", "worker": "worker"}


# A parent and its one big child read as one row / bar ("AsyncLLM init > Overall Loading > AsyncMPClient init")
# when the child lasts at least this share of the parent: the parent's own time left hidden stays under 5 %.
CHAIN_SHARE = 0.95


def phase_of(s: Span) -> str:
    return str(s.attrs.get(sc.PHASE) or "")


def leaves(spans: list[Span]) -> list[Span]:
    """The spans with no child but detail spans, and the detail spans themselves: a `Module import` or `Garbage
    collection` inside a phase refines it and never makes it a parent, so adding detail never lowers an explained share
    (docs/telemetry.md, "Explained share"). The callers leave out the spans that are no work of their own."""
    parents = {s.parent_id for s in spans if phase_of(s) not in sc.DETAIL_PHASES}
    return [s for s in spans if s.span_id not in parents or phase_of(s) in sc.DETAIL_PHASES]


def kind_of(s: Span) -> str:
    return str(s.attrs.get(sc.PROCESS_KIND) or s.resource.get(sc.PROCESS_KIND) or "?")


RANKS = (sc.WORKER_RANK, sc.DP_RANK, sc.API_SERVER_INDEX)  # one of several processes of a kind: which one


def rank_of(s: Span) -> int | None:
    """A process span's rank among the processes of its kind (worker rank, data-parallel rank, API server index)."""
    for key in RANKS:
        v = s.attrs.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def find_root(spans: list[Span]) -> Span | None:
    """The ``vLLM startup`` span without a parent, else the first one, else None."""
    roots = [s for s in spans if s.name == sc.ROOT_SPAN]
    return next((s for s in roots if not s.parent_id), roots[0] if roots else None)


def link(spans: list[Span], root: Span | None = None) -> Span | None:
    """Parent/child links (rebuilt on every call), children by start time; the root, or None. A span whose
    parent is missing (lost in export) hangs under the root so nothing disappears. Readers use ``Start``,
    which calls this once."""
    root = root if root is not None else find_root(spans)
    by_id = {s.span_id: s for s in spans}
    for s in spans:
        s.children = []
    for s in spans:
        if s is root:
            continue
        parent = by_id.get(s.parent_id or "")
        if parent is None or parent is s:
            parent = root
        if parent is not None:
            parent.children.append(s)
    for s in spans:
        s.children.sort(key=lambda c: (c.start, -c.end))
    return root


def phase_seconds(spans: list[Span]) -> dict[tuple[str, str], float]:
    """Wall time of each (process kind, phase): the union of its spans (nested spans of one phase, or the
    same phase in two tensor-parallel workers, count once)."""
    groups: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for s in spans:
        ph = phase_of(s)
        if ph and s.end >= s.start:
            groups.setdefault((kind_of(s), ph), []).append((s.start, s.end))
    return {k: union_length(v) / 1e9 for k, v in groups.items()}


@dataclass
class Lane:
    """One process of the start: its process span (the root for the API server) and the spans it ran."""

    span: Span
    kind: str
    pid: int | None
    rank: int | None
    spans: list[Span] = field(default_factory=list)

    @property
    def label(self) -> str:
        text = KIND_LABEL.get(self.kind, self.kind)
        if self.rank is not None:
            text += f" {self.rank}"
        return text + (f" (pid {self.pid})" if self.pid else "")


def lanes(root: Span, spans: list[Span]) -> list[Lane]:
    """Processes in start order; each span goes to the nearest process span of its kind above it."""
    by_id = {s.span_id: s for s in spans}
    out: dict[str, Lane] = {}
    for s in spans:
        if s is root or phase_of(s) in PROCESS_PHASES[1:]:
            pid = s.attrs.get("process.pid") or s.resource.get("process.pid")
            out[s.span_id] = Lane(s, kind_of(s), int(pid) if isinstance(pid, int) else None, rank_of(s))
    for s in spans:
        cur, kind, seen = s, kind_of(s), 0
        while cur is not None and seen < 64:
            if cur.span_id in out and (out[cur.span_id].kind == kind or cur is root):
                out[cur.span_id].spans.append(s)
                break
            cur = by_id.get(cur.parent_id or "")
            seen += 1
        else:
            if root.span_id in out:
                out[root.span_id].spans.append(s)
    return sorted(out.values(), key=lambda ln: (ln.span.start, ln.rank or 0))


def no_aot_artifact_yet(error: object) -> bool:
    """An AOT load "error" that only says no artifact was saved yet (a first start), not a failed load."""
    return str(error or "").startswith("FileNotFoundError")


def folds_into(parent: Span, child: Span) -> bool:
    """Whether ``child`` may share ``parent``'s row or bar: it lasts >= CHAIN_SHARE of it and neither carries
    a cause of its own (each renderer adds its own conditions: same process, same colour, ...)."""
    return child.duration >= CHAIN_SHARE * parent.duration and not cause_labels(parent) and not cause_labels(child)


def _first(spans: list[Span], phase: str) -> Span | None:
    found = [s for s in spans if phase_of(s) == phase]
    return max(found, key=lambda s: s.end - s.start) if found else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


@dataclass
class Facts:
    """The start's identity, outcome and causes; None where the trace does not say."""

    total: float
    outcome: str
    mode: str | None
    model: str
    device: str | None
    device_model: str | None
    vllm_version: str | None
    modelinfo_hit: bool | None = None
    inspection_s: float = 0.0
    compiled: bool = False
    compile_hit: bool | None = None
    compile_s: float = 0.0
    cpp_builds: int | None = None
    compile_graphs: int | None = None
    compile_cache_dir: str | None = None
    aot_loaded: bool | None = None
    aot_error: str | None = None
    aot_s: float = 0.0
    weights_source: str | None = None
    weights_bytes: int | None = None
    weights_gbps: float | None = None
    weights_s: float = 0.0
    weights_format: str | None = None
    download_bytes: int | None = None
    download_s: float = 0.0
    kv_bytes: int | None = None
    graphs: int | None = None
    capture_sizes: int | None = None
    capture_s: float = 0.0
    tensor_parallel: int = 1
    error: str | None = None
    error_phase: str | None = None
    tree_cpu_s: float | None = None
    cores_busy_peak: float | None = None
    throttled_s: float | None = None
    seconds: dict[tuple[str, str], float] = field(default_factory=dict)

    def phase(self, phase: str, kind: str | None = None) -> float:
        """Seconds of a phase in one process kind, or the longest over kinds."""
        if kind is not None:
            return self.seconds.get((kind, phase), 0.0)
        return max((v for (k, p), v in self.seconds.items() if p == phase), default=0.0)


def facts(root: Span, spans: list[Span]) -> Facts:
    a = root.attrs
    f = Facts(
        total=root.duration, outcome=str(a.get(sc.OUTCOME) or "unknown"), mode=a.get(sc.MODE),
        model=str(a.get(sc.MODEL) or a.get(sc.SERVED_MODEL_NAME) or "?"), device=a.get(sc.DEVICE),
        device_model=a.get(sc.DEVICE_MODEL), vllm_version=a.get(sc.VLLM_VERSION),
        tensor_parallel=int(a.get(sc.TP_SIZE) or 1) if isinstance(a.get(sc.TP_SIZE), int) else 1,
        seconds=phase_seconds(spans),
    )
    if f.model == "?":
        cfg = _first(spans, "config")
        if cfg is not None and cfg.attrs.get(sc.MODEL):
            f.model = str(cfg.attrs[sc.MODEL])
        else:
            f.model = model_from_argv(root.attrs.get(sc.COMMAND_ARGS) or root.resource.get(sc.COMMAND_ARGS)) or "?"
    insp = _first(spans, "model_inspection")
    if insp is not None:
        f.modelinfo_hit = _bool(insp.attrs.get(sc.MODEL_INSPECTION_CACHE_HIT))
        f.inspection_s = insp.duration
    _compile_facts(f, spans)
    _weights_facts(f, spans)
    f.kv_bytes = next((s.attrs[sc.KV_CACHE_BYTES] for s in spans if isinstance(s.attrs.get(sc.KV_CACHE_BYTES), int)),
                      None)
    cap = _first(spans, "cudagraph_capture")
    if cap is not None:
        f.capture_s = f.phase("cudagraph_capture")
        n = cap.attrs.get(sc.CUDAGRAPH_COUNT)
        f.graphs = n if isinstance(n, int) else None
    sizes = a.get(sc.CUDAGRAPH_CAPTURE_SIZES)
    if not isinstance(sizes, int):
        cfg = _first(spans, "config")
        sizes = cfg.attrs.get(sc.CUDAGRAPH_CAPTURE_SIZES) if cfg is not None else None
    f.capture_sizes = sizes if isinstance(sizes, int) else None
    failed = [s for s in spans if s.status == 2]
    if failed:
        deepest = max(failed, key=lambda s: (_depth(s, spans), -s.duration))
        f.error = deepest.status_message or str(deepest.attrs.get(sc.ERROR_TYPE) or "error")
        f.error_phase = deepest.name
    f.tree_cpu_s = _num(a.get(sc.RES_TREE_CPU_TIME))
    f.cores_busy_peak = _num(a.get(sc.RES_SYSTEM_CORES_BUSY_PEAK))
    f.throttled_s = _num(a.get(sc.RES_CGROUP_THROTTLED))
    return f


def _compile_facts(f: Facts, spans: list[Span]) -> None:
    comp = _first(spans, "torch_compile")
    if comp is not None:
        f.compiled = True
        f.compile_s = f.phase("torch_compile")
        f.compile_hit = _bool(comp.attrs.get(sc.COMPILE_CACHE_HIT))
        builds = comp.attrs.get(sc.COMPILE_CPP_BUILDS)
        f.cpp_builds = builds if isinstance(builds, int) else None
        graphs = comp.attrs.get(sc.COMPILE_UNIQUE_GRAPHS)
        f.compile_graphs = graphs if isinstance(graphs, int) else None
        f.compile_cache_dir = comp.attrs.get(sc.COMPILE_CACHE_DIR)
    aot = _first(spans, "aot_load")
    if aot is not None:
        f.aot_loaded = _bool(aot.attrs.get(sc.COMPILE_AOT_LOADED))
        f.aot_error = aot.attrs.get(sc.COMPILE_AOT_LOAD_ERROR)
        f.aot_s = f.phase("aot_load")
        if comp is None and f.aot_loaded:  # vLLM >= 0.17's warm start: the artifact's load is the compile, a hit
            f.compiled, f.compile_hit, f.compile_s = True, True, f.aot_s


def _weights_facts(f: Facts, spans: list[Span]) -> None:
    w = _first(spans, "weights_load")
    if w is not None:
        f.weights_source = w.attrs.get(sc.WEIGHTS_SOURCE)
        f.weights_bytes = w.attrs.get(sc.WEIGHTS_BYTES) if isinstance(w.attrs.get(sc.WEIGHTS_BYTES), int) else None
        f.weights_gbps = _num(w.attrs.get(sc.WEIGHTS_GBPS))
        f.weights_format = w.attrs.get(sc.WEIGHTS_LOAD_FORMAT)
        dl = w.attrs.get(sc.DOWNLOAD_BYTES)
        f.download_bytes = dl if isinstance(dl, int) else None
        f.weights_s = f.phase("weights_load")
    f.download_s = f.phase("weights_download")


def _depth(s: Span, spans: list[Span]) -> int:
    by_id = {x.span_id: x for x in spans}
    d, cur = 0, s
    while cur.parent_id and cur.parent_id in by_id and d < 64:
        cur, d = by_id[cur.parent_id], d + 1
    return d


def cause_labels(s: Span) -> list[str]:
    """Short cause labels for one span (what the tree, the tooltips and compare print)."""
    a, out = s.attrs, []
    if isinstance(a.get(sc.MODEL_INSPECTION_CACHE_HIT), bool):
        out.append("modelinfo cache " + ("hit" if a[sc.MODEL_INSPECTION_CACHE_HIT] else "miss"))
    if isinstance(a.get(sc.COMPILE_CACHE_HIT), bool):
        text = "compile cache " + ("hit" if a[sc.COMPILE_CACHE_HIT] else "miss")
        if isinstance(a.get(sc.COMPILE_CPP_BUILDS), int) and a[sc.COMPILE_CPP_BUILDS]:
            text += f" ({a[sc.COMPILE_CPP_BUILDS]} C++ builds)"
        out.append(text)
    if isinstance(a.get(sc.COMPILE_AOT_LOADED), bool):
        if a[sc.COMPILE_AOT_LOADED]:
            out.append("AOT artifact loaded")
        else:
            err = str(a.get(sc.COMPILE_AOT_LOAD_ERROR) or "")
            out.append("no AOT artifact yet" if no_aot_artifact_yet(err) else
                       f"AOT load failed: {err[:60]}" if err else "AOT artifact not loaded")
    if isinstance(a.get(sc.COMPILE_AOT_BYTES), int):
        out.append(f"artifact {human_bytes(a[sc.COMPILE_AOT_BYTES])}")
    if a.get(sc.IMPORT_MODULE):
        out.append(f"import {a[sc.IMPORT_MODULE]}")
    if isinstance(a.get(sc.GC_GENERATION), int):
        out.append(f"generation {a[sc.GC_GENERATION]}")
    if a.get(sc.WEIGHTS_SOURCE):
        text = f"weights {a[sc.WEIGHTS_SOURCE]}"
        if isinstance(a.get(sc.WEIGHTS_BYTES), int):
            text += f" {human_bytes(a[sc.WEIGHTS_BYTES])}"
        if _num(a.get(sc.WEIGHTS_GBPS)) is not None:
            text += f" at {a[sc.WEIGHTS_GBPS]:.2f} GB/s"
        out.append(text)
    if isinstance(a.get(sc.DOWNLOAD_BYTES), int) and a[sc.DOWNLOAD_BYTES]:
        out.append(f"downloaded {human_bytes(a[sc.DOWNLOAD_BYTES])}")
    if isinstance(a.get(sc.KV_CACHE_BYTES), int):
        out.append(f"KV cache {human_bytes(a[sc.KV_CACHE_BYTES])}")
    if isinstance(a.get(sc.CUDAGRAPH_COUNT), int):
        sizes = a.get(sc.CUDAGRAPH_CAPTURE_SIZES)
        out.append(f"{a[sc.CUDAGRAPH_COUNT]} CUDA graphs" + (f" for {sizes} sizes" if isinstance(sizes, int) else ""))
    if a.get(sc.CUDAGRAPH_MODE) and isinstance(a.get(sc.CUDAGRAPH_SHAPES), int):
        out.append(f"{a[sc.CUDAGRAPH_MODE]} {a[sc.CUDAGRAPH_SHAPES]} shapes")
    shapes = [f"{mode} {a[key]}" for mode, key in (("FULL", sc.CUDAGRAPH_SHAPES_FULL),
                                                   ("PIECEWISE", sc.CUDAGRAPH_SHAPES_PIECEWISE))
              if isinstance(a.get(key), int)]
    if shapes:
        out.append("shapes " + " + ".join(shapes))
    if s.status == 2:
        out.append(f"ERROR {(s.status_message or str(a.get(sc.ERROR_TYPE) or ''))[:100]}")
    return out


def resource_labels(s: Span) -> list[str]:
    """The per-phase resource summary of a leaf span of at least a second (containers only repeat their
    children's, and a waiting span's process is idle by definition)."""
    a = s.attrs
    if s.children or s.duration < 1.0 or a.get(sc.WAITING):
        return []
    out = []
    child = _num(a.get(sc.RES_CHILDREN_CORES_AVG))
    if child is not None and child >= 0.05:  # the span waited for a subprocess: what the child did
        out.append(f"subprocess {child:.1f} cores avg, {seconds(_num(a.get(sc.RES_CHILDREN_CPU_TIME)) or 0)} CPU")
        rss = _num(a.get(sc.RES_CHILDREN_RSS_PEAK))
        if rss:
            out.append(f"subprocess peak RSS {human_bytes(rss)}")
    cores = _num(a.get(sc.RES_CORES_AVG))
    if cores is not None and not out:
        peak = _num(a.get(sc.RES_CORES_PEAK))
        out.append(f"{cores:.1f} cores avg" + (f", peak {peak:.1f}" if peak is not None else ""))
    rd = _num(a.get(sc.RES_DISK_READ))
    if rd and rd >= 1e6:
        out.append(f"read {human_bytes(rd)} from disk")
    return out


def key_causes(f: Facts) -> list[str]:
    """The start's causes in one line's worth: caches, compile, weights, graphs, KV cache, CPU."""
    out = []
    if f.modelinfo_hit is not None:
        out.append(f"modelinfo cache {'hit' if f.modelinfo_hit else 'miss'} ({seconds(f.inspection_s)})")
    if f.compiled:
        text = "compile cache " + {True: "hit", False: "miss", None: "?"}[f.compile_hit]
        if f.cpp_builds:
            text += f", {f.cpp_builds} C++ builds"
        out.append(f"{text} ({seconds(f.compile_s)})")
    elif f.outcome == "ready":
        out.append("no torch.compile (eager)")
    if f.weights_source:
        text = f"weights {f.weights_source}"
        if f.weights_bytes:
            text += f" {human_bytes(f.weights_bytes)}"
        if f.weights_gbps is not None:
            text += f" at {f.weights_gbps:.2f} GB/s"
        out.append(text + f" ({seconds(f.weights_s)})")
    if f.graphs is not None:
        sizes = f" for {f.capture_sizes} sizes" if f.capture_sizes else ""
        out.append(f"{f.graphs} CUDA graphs{sizes} ({seconds(f.capture_s)})")
    elif f.capture_sizes == 0 and f.outcome == "ready":
        out.append("no CUDA graphs")
    if f.kv_bytes:
        out.append(f"KV cache {human_bytes(f.kv_bytes)}")
    if f.tree_cpu_s is not None:
        cores = f.tree_cpu_s / max(f.total, 1e-9)
        out.append(f"CPU {seconds(f.tree_cpu_s)} over all processes ({cores:.1f} cores avg)")
    return out
