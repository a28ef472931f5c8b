"""Advice from the field's playbook (shared reference: seeds-digest), each rule fired only by evidence in
the trace: it names the phase, the evidence (attributes and times read from the spans), the change, and the
expected saving with how it was estimated. A rule whose saving is under ``max(1 s, 2 % of the start)`` stays
silent. Observations are findings without a change to make (e.g. one CPU core saturated).

Stdlib only, no I/O: the printed-at-ready summary imports it inside the server process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import compile_factors as cf
from vllm_otel_startup.model.facts import Facts, human_bytes, no_aot_artifact_yet, phase_of, seconds
from vllm_otel_startup.model.spanmodel import Span

# A cache hit saves most of torch.compile on every pair measured and every figure published (docs/report.md):
# we promise the low end.
COMPILE_WARM_SAVING = 0.6
# vLLM >= 0.26's JIT kernel warmup (Triton / FlashInfer kernels) reads its kernels back from their caches: nearly
# all of it is saved (docs/report.md). Counted from JIT_MIN_S of its wall time.
JIT_WARM_SAVING, JIT_MIN_S = 0.95, 1.0
# A weight load that streams well reaches >= 2 GB/s (Run:ai streamer, parallel NVMe reads, ~10 GB/s at best).
STREAMER_GBPS = 2.0
# "Far below" the storage's capability: under 1 / SLOW_FACTOR of it; loads under SLOW_MIN_BYTES are not judged.
SLOW_FACTOR = 2
SLOW_MIN_BYTES = 100_000_000
CACHED_SHARE = 0.1  # a local load that read less than this share of its weights from block storage read the page cache
# File systems of shared / network storage (vllm.weights.filesystem): copying to local disk is the first fix.
SHARED_FS = ("nfs", "lustre", "fuse", "cifs", "smb", "9p", "ceph", "glusterfs", "gpfs", "beegfs", "virtiofs")
# Capture sizes we suggest keeping (1, 2, 4, 8, 16, 32, 64, 128): capture time scales with their number.
SUGGESTED_SIZES = 8


@dataclass
class Advice:
    rule: str
    phase: str  # the span name the advice is about
    evidence: str
    change: str
    saving_s: float
    basis: str

    def headline(self) -> str:
        return f"{self.change} (expected saving ~{seconds(self.saving_s)})"

    def lines(self) -> list[str]:
        return [f"{self.rule}: {self.headline()}", f"evidence [{self.phase}]: {self.evidence}",
                f"saving estimated as: {self.basis}"]


@dataclass
class Rule:
    rule: str
    symptom: str  # what the trace must show (docs/report.md's table is this list)
    check: Callable[[Facts, list[Span]], Advice | None]


def _floor(f: Facts) -> float:
    return max(1.0, 0.02 * f.total)


def _download_span(spans: list[Span]) -> Span | None:
    return next((s for s in spans if phase_of(s) == "weights_download"), None)


def _hub_download(f: Facts, spans: list[Span]) -> Advice | None:
    dl = _download_span(spans)
    span_bytes = dl.attrs.get(sc.DOWNLOAD_BYTES) if dl is not None else None
    nbytes = f.download_bytes or (span_bytes if isinstance(span_bytes, int) else None)
    if not nbytes and (f.weights_source != "hub_download"
                       and (dl is None or isinstance(span_bytes, int))):  # 0 bytes measured: a hub-cache hit
        return None
    cost = f.download_s or f.weights_s
    gbps = _number(dl.attrs.get(sc.DOWNLOAD_GBPS)) if dl is not None else None
    what = "weights downloaded from the hub during the start (" + ", ".join(
        p for p in (human_bytes(nbytes) if nbytes else "", f"{gbps:.3f} GB/s" if gbps else "", seconds(cost)) if p)
    return Advice("hub_download", "Download weights - HF" if f.download_s else "Load weights",
                  what + "); every start without that cache downloads them again",
                  "pre-download the model into a shared volume cache (HF_HOME on a persistent/RWX volume) or the "
                  "image, point vllm serve at it and set HF_HUB_OFFLINE=1 (no hub download or check at start)",
                  cost, "the whole download (field: 840 s -> 0 with EFS + offline hub, 61 s -> 0 with a cached volume)")


def _no_compile_cache(f: Facts, spans: list[Span]) -> bool:
    """A warm root (other caches) whose compile cache held nothing: no artifact for this start's AOT key and no other
    key beside it. With another key there, the key changed (compile_key_changed names the factor), and the root
    was not empty."""
    if f.mode == "cold" or not no_aot_artifact_yet(f.aot_error):
        return False
    info = cf.key_info(spans)
    if info is None:
        return True
    return info.other_keys == 0 if info.other_keys is not None else not info.nearest


def _fresh_cache_root(f: Facts, spans: list[Span]) -> Advice | None:
    empty_root = f.mode == "cold" or _no_compile_cache(f, spans)
    compile_miss = f.compile_hit is False
    info_miss = f.modelinfo_hit is False
    if not empty_root or not (compile_miss or info_miss):
        return None
    parts, saving, basis = [], 0.0, []
    if compile_miss:
        builds = f" ({f.cpp_builds} C++ builds)" if f.cpp_builds else ""
        parts.append(f"torch.compile missed its cache{builds}: {seconds(f.compile_s)}")
        saving += COMPILE_WARM_SAVING * f.compile_s
        basis.append(f"{int(COMPILE_WARM_SAVING * 100)} % of torch.compile (a hit saved 59-83 % here, 74 % in the "
                     "field)")
    if info_miss:
        parts.append(f"model inspection ran in a subprocess: {seconds(f.inspection_s)}")
        saving += f.inspection_s
        basis.append("all of the model inspection (0.001 s from the modelinfo cache)")
    jit = f.phase("jit_warmup")  # wall time over the ranks, which warm up side by side
    if jit >= JIT_MIN_S:
        parts.append(f"the JIT kernel warmup built its kernels: {seconds(jit)}")
        saving += JIT_WARM_SAVING * jit
        basis.append(f"{int(JIT_WARM_SAVING * 100)} % of the JIT kernel warmup (19.35 -> 0.42 s on a GPU start)")
    where = ("the vLLM cache root was empty at start (vllm.startup.mode=cold)" if f.mode == "cold" else
             "the vLLM cache root held no compiled artifact (vllm.startup.mode=warm: other caches only)")
    kernels = " and TRITON_CACHE_DIR (default ~/.triton)" if jit >= JIT_MIN_S else ""
    return Advice("fresh_cache_root", "torch.compile" if compile_miss else "Model architecture inspection",
                  where + "; " + "; ".join(parts),
                  f"put VLLM_CACHE_ROOT (default ~/.cache/vllm){kernels} on storage that outlives the container "
                  "(volume or host path), so the next start of this model and config hits its caches",
                  saving, " + ".join(basis))


def _compile_key_changed(f: Facts, spans: list[Span]) -> Advice | None:
    if f.mode != "warm" or f.compile_hit is not False or _no_compile_cache(f, spans):
        return None
    evidence = (f"the cache root had entries (mode=warm) but torch.compile missed ({seconds(f.compile_s)}"
                + (f", {f.cpp_builds} C++ builds" if f.cpp_builds else "") + ")")
    change = ("the compile cache key changed since the cached start: keep vLLM and torch versions, model, "
              "dtype, parallel sizes and compilation config identical across restarts, or pre-warm the "
              "cache for this configuration (one start at image build)")
    info = cf.key_info(spans)
    if info is not None and info.nearest and info.changed:
        changed = cf.from_changed(info.changed)
        evidence += (f"; key {info.key}, the nearest key cached on this root is {info.nearest}: "
                     f"{cf.describe(changed)} differ{'s' if len(changed) == 1 else ''}")
        change = f"the compile cache key changed: {cf.pin_hint(changed)}"
    elif info is not None:
        evidence += f"; key {info.key} (no other key with a factor file on this root)"
    return Advice("compile_key_changed", "torch.compile", evidence, change,
                  COMPILE_WARM_SAVING * f.compile_s,
                  f"{int(COMPILE_WARM_SAVING * 100)} % of torch.compile, as on a cache hit")


def _aot_load_failed(f: Facts, spans: list[Span]) -> Advice | None:
    err = str(f.aot_error or "")
    if f.aot_loaded is not False or not err or no_aot_artifact_yet(err):
        return None
    return Advice("aot_load_failed", "AOT cache load",
                  f"a saved AOT artifact existed but failed to load ({err[:80]}); vLLM then compiled again",
                  "set VLLM_USE_AOT_COMPILE=0 to skip the unusable artifact (the start after the switch compiles "
                  "once more: the non-AOT cache is separate), or upgrade vLLM / report the load error upstream",
                  f.aot_s, "the failed load, from the second start after the switch (measured here: Warmup "
                  "9.9 -> 6.5 s; the first start recompiled, 29 s)")


def _many_graph_sizes(f: Facts, spans: list[Span]) -> Advice | None:
    n = f.capture_sizes  # batch sizes; each size captures several graphs (one per layer piece, per mode)
    if not f.capture_s or not n or n <= SUGGESTED_SIZES:
        return None
    graphs = f" ({f.graphs} graphs)" if f.graphs else ""
    return Advice("many_cudagraph_sizes", "Capture model",
                  f"CUDA-graph capture of {n} batch sizes{graphs} took {seconds(f.capture_s)}",
                  "capture only the batch sizes your traffic uses, e.g. --cudagraph-capture-sizes 1 2 4 8 16 32 64 "
                  "128 or --max-cudagraph-capture-size 128 (--cuda-graph-sizes on older vLLM); batches above the "
                  "largest size run without graphs. The sizes are part of the compile cache key: the first start "
                  "with new sizes compiles again (once), the starts after it hit",
                  f.capture_s * (1 - SUGGESTED_SIZES / n),
                  f"capture time scales with the number of sizes ({n} -> {SUGGESTED_SIZES}; 51 -> 8 sizes on a "
                  "GPU start: 6.19 -> 1.54 s; field: 54 -> 7 s)")


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def storage_reference(spans: list[Span]) -> tuple[float, str]:
    """What the storage could deliver, from evidence: the fastest read this start measured from local storage
    outside the weight load (a span whose process read >= 100 MB from block storage, resource sampler), else the
    field's figure for a weight load streamed from fast storage (STREAMER_GBPS). Measured beats assumed: a start
    on a slow local disk is judged by that disk, and one whose local disk read fast shows what it left unused."""
    by_id = {s.span_id: s for s in spans}
    around: set[str] = set()  # the weight load and the spans that contain it: their reads include the weights'
    for w in (s for s in spans if phase_of(s) in ("weights_load", "weights_download")):
        cur: Span | None = w
        while cur is not None and cur.span_id not in around:
            around.add(cur.span_id)
            cur = by_id.get(cur.parent_id or "")
    best: tuple[float, str] | None = None
    for s in spans:
        disk, rate = _number(s.attrs.get(sc.RES_DISK_READ)), _number(s.attrs.get(sc.RES_DISK_READ_GBPS))
        if s.span_id in around or not disk or disk < SLOW_MIN_BYTES or not rate:
            continue
        if best is None or rate > best[0]:
            best = (rate, f"{s.name} read {human_bytes(disk)} from local storage at {rate:.2f} GB/s in this start")
    return best or (STREAMER_GBPS, f"a load streamed from fast storage reaches {STREAMER_GBPS:g} GB/s "
                                   "(field: Run:ai streamer, parallel NVMe reads)")


def _load_gbps(f: Facts) -> float | None:
    return f.weights_gbps or (f.weights_bytes / 1e9 / f.weights_s if f.weights_bytes and f.weights_s else None)


def _weights_span(spans: list[Span]) -> Span | None:
    return next((s for s in spans if phase_of(s) == "weights_load"), None)


def _streamed_from_object_store(w: Span | None) -> bool:
    return w is not None and w.attrs.get(sc.WEIGHTS_SOURCE) == "object_store" \
        and w.attrs.get(sc.WEIGHTS_LOADER) == "runai_streamer"


def _slow_weights(f: Facts, spans: list[Span]) -> Advice | None:
    """A weight load far below what the storage could deliver (storage_reference): faster storage or a streamer."""
    w = _weights_span(spans)
    if not f.weights_bytes or f.weights_bytes < SLOW_MIN_BYTES or f.weights_source in ("hub_download", "dummy") \
            or _streamed_from_object_store(w):  # that one is streamer_concurrency's
        return None
    gbps = _load_gbps(f)
    ref, ref_basis = storage_reference(spans)
    if gbps is None or gbps >= ref / SLOW_FACTOR:
        return None
    disk = w.attrs.get(sc.RES_DISK_READ) if w is not None else None
    fs_type = str(w.attrs.get(sc.WEIGHTS_FILESYSTEM) or "") if w is not None else ""
    shared = fs_type.startswith(SHARED_FS)
    if fs_type and not shared and isinstance(disk, (int, float)) and disk < CACHED_SHARE * f.weights_bytes:
        return None  # local storage that was not read: the bytes came from the page cache, the load was CPU-bound
    where = (f" from a {fs_type} file system" if fs_type else "") + (
        f"; {human_bytes(disk)} came from block storage" if isinstance(disk, (int, float)) and disk else "")
    change = ("copy the weights to local NVMe (or bake them into the image / a local volume) before start, or "
              "stream them from where they are: --load-format runai_streamer with RUNAI_STREAMER_CONCURRENCY "
              "raised" if shared else
              "stream the weights: --load-format runai_streamer (raise RUNAI_STREAMER_CONCURRENCY on network "
              "storage) or a tensorizer-serialized model; or serve from local NVMe")
    return Advice("slow_weights", "Load weights",
                  f"{human_bytes(f.weights_bytes)} of weights loaded at {gbps:.3f} GB/s ({seconds(f.weights_s)})"
                  f"{where}; the storage could do {ref:.2f} GB/s: {ref_basis}",
                  change, f.weights_s - f.weights_bytes / (ref * 1e9),
                  f"the same bytes at {ref:.2f} GB/s (field: 142 -> 59 s with the Run:ai streamer)")


def _streamer_concurrency(f: Facts, spans: list[Span]) -> Advice | None:
    """Run:ai streamer reading an object store well below a streamed load's rate: more reader threads."""
    w = _weights_span(spans)
    if not _streamed_from_object_store(w) or not f.weights_bytes or f.weights_bytes < SLOW_MIN_BYTES:
        return None
    gbps = _load_gbps(f)
    if gbps is None or gbps >= STREAMER_GBPS / SLOW_FACTOR:
        return None
    conc = w.attrs.get(sc.WEIGHTS_STREAMER_CONCURRENCY)
    now = f" (this start: {conc})" if isinstance(conc, int) else ""
    return Advice("streamer_concurrency", "Load weights",
                  f"the Run:ai streamer read {human_bytes(f.weights_bytes)} from an object store at {gbps:.3f} GB/s "
                  f"({seconds(f.weights_s)}){now}",
                  f"raise RUNAI_STREAMER_CONCURRENCY{now} (e.g. double it, up to 64) or --model-loader-extra-config "
                  "'{\"concurrency\": N}'; keep the bucket in the same region as the nodes",
                  f.weights_s - f.weights_bytes / (STREAMER_GBPS * 1e9),
                  f"the same bytes at {STREAMER_GBPS:g} GB/s, a streamed load's rate (object-store reads scale "
                  "with concurrent range requests until the network is saturated)")


def _throttled(f: Facts, spans: list[Span]) -> Advice | None:
    if not f.throttled_s:
        return None
    return Advice("cpu_throttled", "vLLM startup",
                  f"the container's CPU quota throttled the start for {seconds(f.throttled_s)}",
                  "raise the CPU limit (or drop it and keep the request): startup is CPU-bound",
                  f.throttled_s, "the throttled time")


def _imports_on_storage(f: Facts, spans: list[Span]) -> Advice | None:
    waits = []
    for s in spans:
        if phase_of(s) != "imports" or s.duration < 3:
            continue
        cores, disk = s.attrs.get(sc.RES_CORES_AVG), s.attrs.get(sc.RES_DISK_READ)
        if isinstance(cores, (int, float)) and isinstance(disk, (int, float)) and disk >= 2e8 and cores < 0.6:
            waits.append((s, s.duration * (1 - cores), disk))
    if not waits:
        return None
    s, idle, disk = max(waits, key=lambda w: w[1])
    return Advice("imports_on_storage", "Imports",
                  f"imports in the {s.attrs.get(sc.PROCESS_KIND, '?')} read {human_bytes(disk)} from storage and kept "
                  f"the CPU busy only {100 * (1 - idle / s.duration):.0f} % of {seconds(s.duration)}",
                  "warm the page cache or the image layer before start (e.g. pre-pull / lazy-pull with prefetch), "
                  "keep site-packages on local disk",
                  sum(w[1] for w in waits), "the import time spent waiting on storage")


RULES: list[Rule] = [
    Rule("hub_download", "weights downloaded from the hub during the start", _hub_download),
    Rule("fresh_cache_root", "cache root empty at start and a torch.compile or model-info cache miss",
         _fresh_cache_root),
    Rule("compile_key_changed", "cache root warm but torch.compile missed", _compile_key_changed),
    Rule("aot_load_failed", "saved AOT artifact present but its load failed", _aot_load_failed),
    Rule("many_cudagraph_sizes", f"CUDA-graph capture of more than {SUGGESTED_SIZES} sizes", _many_graph_sizes),
    Rule("slow_weights", "weights (>= 100 MB, not a download, not a streamed object store) loaded below half of "
         "what the storage could do (storage_reference); not a load from local storage that read under 10 % of its "
         "bytes from it (page cache: CPU-bound)", _slow_weights),
    Rule("streamer_concurrency", "Run:ai streamer from an object store below half of a streamed load's rate",
         _streamer_concurrency),
    Rule("cpu_throttled", "cgroup CPU throttling during the start (resource sampler)", _throttled),
    Rule("imports_on_storage", "imports reading >= 200 MB with the CPU < 60 % busy (resource sampler)",
         _imports_on_storage),
]


@dataclass
class RuleFailure:
    """A rule that raised on this start: its advice is missing (the command line reports it as an error)."""

    rule: str
    error: str  # "TypeError: ..."


def advise(f: Facts, spans: list[Span], failures: list[RuleFailure] | None = None) -> list[Advice]:
    """Rules that fire on this start, largest expected saving first. Never raises: a rule that does is skipped,
    and named in ``failures`` when given (inside the server the printout goes on without it)."""
    out = []
    for r in RULES:
        try:
            a = r.check(f, spans)
        except Exception as exc:  # noqa: BLE001 - one odd attribute must not hide the other advice
            if failures is not None:
                failures.append(RuleFailure(r.rule, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if a is not None and a.saving_s >= _floor(f):
            out.append(a)
    return sorted(out, key=lambda a: -a.saving_s)


def observe(f: Facts, spans: list[Span]) -> list[str]:
    """Findings without a change to make: one saturated core, the spawn re-imports."""
    out = []
    for s in sorted(spans, key=lambda s: -s.duration):
        cores, peak = s.attrs.get(sc.RES_CORES_AVG), s.attrs.get(sc.RES_CORES_PEAK)
        if not s.children and not s.attrs.get(sc.WAITING) and s.duration >= max(3.0, 0.1 * f.total) \
                and isinstance(cores, (int, float)) \
                and 0.8 <= cores <= 1.3 and (not isinstance(peak, (int, float)) or peak <= 1.6):
            out.append(f"CPU-bound: {s.name} [{s.attrs.get(sc.PROCESS_KIND, '?')}] kept one core saturated for "
                       f"{seconds(s.duration)} ({cores:.1f} cores avg): a faster core shortens it, more cores do not")
            break
    reimports = sum(v for (k, p), v in f.seconds.items() if p in ("imports", "interpreter_start") and k != "api_server")
    if reimports >= max(2.0, 0.1 * f.total):
        out.append(f"re-imports: {seconds(reimports)} ({100 * reimports / max(f.total, 1e-9):.0f} %) of the start is "
                   "the EngineCore and worker processes starting Python and importing vLLM again (spawned processes)")
    return out
