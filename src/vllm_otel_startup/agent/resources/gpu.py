"""GPU readings through NVML (nvidia-ml-py), fail-soft: no driver, no library or no device means no GPU.

Never torch: the API server must not initialise CUDA. NVML is loaded lazily by the sampler thread, and only
when the NVIDIA driver is present (a cheap file check), so a CPU host never imports pynvml.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from vllm_otel_startup import diagnostics

_log = logging.getLogger("vllm_otel_startup")


def driver_present() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


class Nvml:
    """The host's GPUs as NVML sees them; ``ok`` is False (and every reading empty) without a usable NVML."""

    def __init__(self) -> None:
        self.ok = False
        self.devices: list[tuple[Any, dict[str, str]]] = []  # (handle, {hw.id, hw.name, hw.vendor})
        self._pcie_fields: bool | None = None
        self._host_model: str | None = None
        if not driver_present():
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            host = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                host.append((h, {"hw.id": _text(pynvml.nvmlDeviceGetUUID(h)),
                                 "hw.name": _text(pynvml.nvmlDeviceGetName(h)), "hw.vendor": "nvidia"}))
            self.devices = visible(host, os.environ.get("CUDA_VISIBLE_DEVICES"))
            self.ok = bool(self.devices)
            self._host_model = host[0][1]["hw.name"] if host else None  # (a MIG instance names no whole GPU)
        except Exception as exc:  # noqa: BLE001 - no NVML: the GPU parts are simply absent
            _log.debug("NVML unavailable: %s", exc)

    @property
    def model(self) -> str | None:
        return self.devices[0][1]["hw.name"] if self.ok else self._host_model

    def device_readings(self) -> list[tuple[dict[str, str], dict[str, float]]]:
        """Per device: memory used / total (By), utilisation (0..1), power (W) and the driver's cumulative
        PCIe byte counters (rx / tx since the driver loaded; absent where the driver has no such field).
        A reading a GPU does not support is left out."""
        out = []
        for h, ident in self.devices if self.ok else ():
            r: dict[str, float] = {}
            mem = self._try(self._nv.nvmlDeviceGetMemoryInfo, h)
            if mem is not None:
                r["mem_used"], r["mem_total"] = float(mem.used), float(mem.total)
            util = self._try(self._nv.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                r["util"] = util.gpu / 100.0
            power = self._try(self._nv.nvmlDeviceGetPowerUsage, h)  # mW
            if power is not None:
                r["power"] = power / 1000.0
            r.update(self._pcie_counters(h))
            out.append((ident, r))
        return out

    def _pcie_counters(self, h: Any) -> dict[str, float]:
        """NVML_FI_DEV_PCIE_COUNT_RX_BYTES / TX_BYTES (198 / 197): counters, not the 20 ms rate samples of
        nvmlDeviceGetPcieThroughput, which cannot be integrated into byte totals at any practical rate."""
        if self._pcie_fields is False:
            return {}
        vals = self._try(self._nv.nvmlDeviceGetFieldValues, h, [198, 197])
        out: dict[str, float] = {}
        for key, v in zip(("pcie_rx", "pcie_tx"), vals or (), strict=False):
            if v.nvmlReturn == 0 and v.valueType in (2, 3):  # unsigned long / unsigned long long
                out[key] = float(v.value.ullVal if v.valueType == 3 else v.value.ulVal)
        if len(out) < 2:
            self._pcie_fields = False  # unsupported here: never ask again
            return {}
        return out

    @staticmethod
    def _try(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a reading this GPU or driver does not support
            return None

    def process_memory(self, pid: int) -> int | None:
        """GPU memory used by ``pid`` on all devices; None when NVML cannot see the process (e.g. a PID
        namespace: NVML reports host PIDs)."""
        if not self.ok:
            return None
        total, seen = 0, False
        for h, _ in self.devices:
            for p in self._try(self._nv.nvmlDeviceGetComputeRunningProcesses, h) or ():
                if p.pid == pid:
                    seen = True
                    total += int(p.usedGpuMemory or 0)
        return total if seen else None


def visible(host: list[tuple[Any, dict[str, str]]], cuda_visible: str | None) -> list[tuple[Any, dict[str, str]]]:
    """The host's GPUs (NVML's order: PCI bus order) this start may use: ``CUDA_VISIBLE_DEVICES`` names them by index or
    by UUID (``GPU-...``, a unique prefix is enough), in CUDA's order; NVML ignores the variable, so without this
    filter a start pinned to one GPU would report, and poll, every GPU of the host (another start's included). Unset:
    all of them. A list CUDA stops reading at (an entry that names no GPU, a repeated one) keeps the entries before
    it, as CUDA does; an empty one leaves no GPU. Indices are NVML's, which is CUDA's on a host of identical GPUs."""
    if cuda_visible is None:
        return host
    out: list[tuple[Any, dict[str, str]]] = []
    for entry in (e.strip() for e in cuda_visible.split(",")):
        if entry.isdigit():
            found = [host[int(entry)]] if int(entry) < len(host) else []
        else:
            found = [d for d in host if entry and d[1]["hw.id"].startswith(entry)]
        if len(found) != 1 or found[0] in out:
            break
        out.extend(found)
    return out


def in_pid_namespace(status: str = "/proc/self/status") -> bool:
    """True inside a nested PID namespace (a pod, most containers; ``NSpid`` in /proc/self/status lists this
    process's PID in more than one namespace). NVML lists host PIDs: it never lists this process there, and a host
    process that happens to have our number is another process."""
    try:
        with open(status, "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return len(line.split()) > 2
    except OSError:
        pass
    return False


def child_may_load_nvml() -> bool:
    """May an EngineCore or worker load NVML for its own GPU memory? Only with the driver, outside a PID namespace
    (NVML lists host PIDs, never this process there), unless the overhead diagnostic ``OFF=child_nvml`` says not."""
    return driver_present() and not in_pid_namespace() and not diagnostics.off("child_nvml")


NVML_PROCESS, TORCH_RESERVED = "nvml_process", "torch_reserved"
PENDING = "pending"  # no source yet: the sampler thread is loading NVML, or the context holds no memory yet


class ProcessGpuMemory:
    """GPU memory held by this process, from one source fixed for the process's life, so that both ends of every
    span are read the same way (vllm.startup.resource.gpu_memory_source; docs/metrics.md):

    - ``nvml_process``: NVML's per-process figure (everything the process holds, CUDA context included), where
      NVML lists this process when its CUDA context is first seen;
    - ``torch_reserved`` otherwise: PyTorch's caching allocator (not the CUDA context, nor memory allocated
      outside PyTorch such as NCCL buffers). NVML lists host PIDs, so inside a PID namespace (every pod) NVML
      never sees the process: the source is ``torch_reserved`` from the first reading, NVML is not asked.

    A reading that fails is absent (None), never replaced by the other source nor by 0. NVML's device-wide
    figures (other processes' memory included) are never a per-process figure: they only feed hw.gpu.*."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.source: str | None = None

    def fix(self, nvml: Nvml | None) -> str | None:
        """Choose the source once; later calls keep it. Where NVML could list this process, wait until the process
        demonstrably holds GPU memory: ``torch.cuda`` reports itself initialised before the CUDA runtime creates
        the context (lazily, at the first allocation), and NVML lists the process only from then on (fixed at the
        first sight of ``is_initialized()``, the source would be ``torch_reserved`` before NVML could list the
        process). Listed: ``nvml_process``; PyTorch holds memory but NVML does not list us (or fails):
        ``torch_reserved``; neither yet: still None (the reading is pending)."""
        if self.source is None:
            if nvml is None or not nvml.ok or in_pid_namespace():
                self.source = TORCH_RESERVED
            elif nvml.process_memory(self.pid) is not None:
                self.source = NVML_PROCESS
            elif _torch_reserved() > 0:
                self.source = TORCH_RESERVED
        return self.source

    def reading(self, nvml: Nvml | None, sampling: bool) -> tuple[int | None, str]:
        """(bytes or None where the reading failed, source) in a process whose CUDA context exists. The first
        call fixes the source, unless the sampler thread (``sampling``) is about to load NVML and fix it:
        until then the reading is (None, "pending"). In a PID namespace NVML cannot see the process: no wait."""
        if self.source is None:
            if not (sampling and nvml is None and child_may_load_nvml()):
                self.fix(nvml)
            if self.source is None:
                return None, PENDING
        return self.read(nvml), self.source

    def read(self, nvml: Nvml | None) -> int | None:
        """This process's GPU memory from its source; None where the reading fails (or no source yet)."""
        try:
            if self.source == NVML_PROCESS:
                return nvml.process_memory(self.pid) if nvml is not None else None
            if self.source == TORCH_RESERVED:
                return reserved_bytes()
        except Exception:  # noqa: BLE001 - a reading that fails is absent
            return None
        return None


def reserved_bytes() -> int:
    """PyTorch's reserved bytes on the current device: ``torch.cuda.memory_reserved()``'s figure, read from the
    allocator's nested statistics (``torch.cuda.memory_stats_as_nested_dict``'s source): memory_reserved() flattens
    every statistic into a new dict first, a cost paid at every span end (hundreds in an EngineCore)."""
    cuda = sys.modules["torch.cuda"]
    stats = getattr(sys.modules.get("torch._C"), "_cuda_memoryStats", None)
    if stats is not None:
        try:
            return int(stats(cuda.current_device())["reserved_bytes"]["all"]["current"])
        except Exception:  # noqa: BLE001 - another torch: its public reading
            pass
    return int(cuda.memory_reserved())


def _torch_reserved() -> int:
    try:
        return reserved_bytes()
    except Exception:  # noqa: BLE001 - unreadable: not a sign of memory held
        return 0


def gpu_delta(a: Any, b: Any) -> tuple[int, str] | None:
    """(end - start, source) of a span's GPU memory from its two readings (sampler.Snapshot ``gpu``, ``gpu_src``),
    both from one source; None where an end is unreadable. A process without a CUDA context (source None) holds
    none: a span that creates the context starts from 0."""
    if b.gpu is None or b.gpu_src is None:
        return None
    if a.gpu_src is None:
        return b.gpu, b.gpu_src
    if a.gpu is None or a.gpu_src != b.gpu_src:
        return None
    return b.gpu - a.gpu, b.gpu_src


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
