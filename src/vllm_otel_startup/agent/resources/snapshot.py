"""A process's exact resource readings at one instant (a span's start or end), and what two of them say of the
interval between them (a span's resource attributes)."""

from __future__ import annotations

from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources import gpu
from vllm_otel_startup.agent.resources.procfs import rss_bytes


class Snapshot:
    """Exact readings at one instant (a span's start or end). ``gpu``/``gpu_src``: (None, None) without a CUDA
    context (none held), (bytes, source) or, where the reading failed, (None, source) (gpu.ProcessGpuMemory)."""

    __slots__ = ("t", "cpu_ns", "read", "gpu", "gpu_src", "child_cpu", "child_rss", "rss", "hwm")

    def __init__(self, t: int, cpu_ns: int, read: int | None, gpu: int | None, gpu_src: str | None = None,
                 child_cpu: float = 0.0, child_rss: int = 0, rss: int | None = None, hwm: int | None = None) -> None:
        self.t, self.cpu_ns, self.read, self.gpu, self.gpu_src = t, cpu_ns, read, gpu, gpu_src
        self.child_cpu, self.child_rss = child_cpu, child_rss  # reaped subprocesses (getrusage)
        self.rss, self.hwm = rss, hwm  # resident memory now, and its high-water mark (getrusage's ru_maxrss)


def summarize(a: Snapshot, b: Snapshot, cores: list[float], rss: list[int]) -> dict[str, Any]:
    """Resource attributes of the interval between two snapshots; ``cores`` and ``rss``: the sampler's readings inside
    it (its cores peak; its RSS peak where the high-water mark did not rise there)."""
    seconds = max((b.t - a.t) / 1e9, 1e-9)
    cpu = (b.cpu_ns - a.cpu_ns) / 1e9
    attrs: dict[str, Any] = {sc.RES_CPU_TIME: round(cpu, 4), sc.RES_CORES_AVG: round(cpu / seconds, 3)}
    attrs[sc.RES_SAMPLES] = len(cores)
    if cores:
        attrs[sc.RES_CORES_PEAK] = round(max(cores), 3)
    if a.hwm is not None and b.hwm is not None and b.hwm > a.hwm:
        peak = b.hwm  # the process's high-water mark rose inside the span: its peak was reached here
    else:
        peak = max([*rss, a.rss or 0, b.rss if b.rss is not None else (rss_bytes() or 0)])
    if peak:
        attrs[sc.RES_RSS_PEAK] = peak
    if a.read is not None and b.read is not None:
        attrs[sc.RES_DISK_READ] = b.read - a.read
        attrs[sc.RES_DISK_READ_GBPS] = round((b.read - a.read) / seconds / 1e9, 4)
    child = b.child_cpu - a.child_cpu
    if child > 0.005:  # a subprocess this span waited for (e.g. the model-inspection subprocess)
        attrs[sc.RES_CHILDREN_CPU_TIME] = round(child, 4)
        attrs[sc.RES_CHILDREN_CORES_AVG] = round(child / seconds, 3)
        if b.child_rss:
            attrs[sc.RES_CHILDREN_RSS_PEAK] = b.child_rss
    delta = gpu.gpu_delta(a, b)
    if delta is not None:
        attrs[sc.RES_GPU_MEMORY_DELTA], attrs[sc.RES_GPU_MEMORY_SOURCE] = delta
    return attrs
