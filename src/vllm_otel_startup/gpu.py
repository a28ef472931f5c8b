"""GPU readings through NVML (nvidia-ml-py), fail-soft: no driver, no library or no device means no GPU.

Never torch: the API server must not initialise CUDA. NVML is loaded lazily by the sampler thread, and only
when the NVIDIA driver is present (a cheap file check), so a CPU host never imports pynvml.
"""

from __future__ import annotations

import logging
import os
from typing import Any

_log = logging.getLogger("vllm_otel_startup")


def driver_present() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


class Nvml:
    """The host's GPUs as NVML sees them; ``ok`` is False (and every reading empty) without a usable NVML."""

    def __init__(self) -> None:
        self.ok = False
        self.devices: list[tuple[Any, dict[str, str]]] = []  # (handle, {hw.id, hw.name, hw.vendor})
        if not driver_present():
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                self.devices.append((h, {"hw.id": _text(pynvml.nvmlDeviceGetUUID(h)),
                                         "hw.name": _text(pynvml.nvmlDeviceGetName(h)), "hw.vendor": "nvidia"}))
            self.ok = bool(self.devices)
        except Exception as exc:  # noqa: BLE001 - no NVML: the GPU parts are simply absent
            _log.debug("NVML unavailable: %s", exc)

    @property
    def model(self) -> str | None:
        return self.devices[0][1]["hw.name"] if self.ok else None

    def device_readings(self, pcie: bool) -> list[tuple[dict[str, str], dict[str, float]]]:
        """Per device: memory used / total (By), utilisation (0..1), power (W), PCIe rx / tx (By/s, if asked:
        each PCIe reading blocks ~20 ms in the driver). A reading a GPU does not support is left out."""
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
            for key, counter in (("pcie_rx", 1), ("pcie_tx", 0)) if pcie else ():  # NVML_PCIE_UTIL_*_BYTES
                kbps = self._try(self._nv.nvmlDeviceGetPcieThroughput, h, counter)  # KB/s
                if kbps is not None:
                    r[key] = float(kbps) * 1024.0
            out.append((ident, r))
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

    def used_memory(self) -> int | None:
        """GPU memory used on all devices (one NVML reading each: this runs at every span's edges)."""
        if not self.ok:
            return None
        infos = [self._try(self._nv.nvmlDeviceGetMemoryInfo, h) for h, _ in self.devices]
        return int(sum(i.used for i in infos if i is not None))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
