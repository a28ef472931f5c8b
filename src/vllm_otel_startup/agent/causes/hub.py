"""The hub-download cause probe (HubDownload): the hub-cache blobs written during vLLM's download span, their
bytes and the download throughput; with the hub-cache folder as the process resolved it."""

from __future__ import annotations

import os
import sys
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Probe, ProbeHost, gb_per_s


def hub_cache_dir() -> str | None:
    """huggingface_hub's cache folder as the process resolved it (HF_HUB_CACHE, else HF_HOME/hub)."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None and getattr(constants, "HF_HUB_CACHE", None):
        return str(constants.HF_HUB_CACHE)
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")


def blobs_written_since(cache: str, since_ns: int) -> tuple[int, int]:
    """(files, bytes) of hub-cache blobs (finished, or ``.incomplete`` partial ones) last written at or after
    ``since_ns``: what arrived from the hub since then. Blobs a cache hit reuses are not written."""
    files = total = 0
    try:
        repos = [e.path for e in os.scandir(cache) if e.is_dir() and "--" in e.name]
    except OSError:
        return 0, 0
    for repo in repos:
        blobs = os.path.join(repo, "blobs")
        try:  # a blob created (or renamed from .incomplete) since then touched its directory: skip the others
            if os.stat(blobs).st_mtime_ns < since_ns:
                continue
            entries = list(os.scandir(blobs))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_mtime_ns >= since_ns:
                files += 1
                total += st.st_size
    return files, total


class HubDownload(Probe):
    """Download weights - HF (vLLM's span around download_weights_from_hf): the hub-cache blobs written during
    the span are what arrived; their bytes over the span's duration are the download throughput. With several
    workers, one downloads under vLLM's file lock and the others wait in their own span: they see the same blobs
    arrive, so sum the span with the most bytes, not all of them."""

    phase = "weights_download"

    def on_ending(self, rt: ProbeHost, span: Any) -> None:
        start = getattr(span, "start_time", None)
        cache = hub_cache_dir()
        if not start or not cache:
            return
        files, nbytes = blobs_written_since(cache, start)
        attrs: dict[str, Any] = {sc.DOWNLOAD_FILES: files, sc.DOWNLOAD_BYTES: nbytes}
        gbps = gb_per_s(nbytes, span)
        if gbps is not None:
            attrs[sc.DOWNLOAD_GBPS] = gbps
        span.set_attributes(attrs)
