"""The download and file-system probes on real files (a hub-cache layout built in tmp_path; the real hub download
is tests/e2e/test_weight_sources.py): blobs written during the span count, blobs a cache hit reuses do not."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import filesystem_of
from vllm_otel_startup.agent.causes.hub import HubDownload, blobs_written_since


def _blob(cache, repo: str, name: str, size: int, mtime_ns: int | None = None):
    d = cache / f"models--{repo.replace('/', '--')}" / "blobs"
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_bytes(b"x" * size)
    if mtime_ns is not None:
        os.utime(p, ns=(mtime_ns, mtime_ns))
    return p


def test_blobs_written_since_counts_only_what_arrived(tmp_path):
    now = time.time_ns()
    _blob(tmp_path, "org/old", "a" * 64, 1000, now - 3_600 * 10**9)  # in the cache before: reused, not counted
    _blob(tmp_path, "org/new", "b" * 64, 5000)
    _blob(tmp_path, "org/new", "c" * 64 + ".incomplete", 700)  # a partial download still arrived
    assert blobs_written_since(str(tmp_path), now - 10**9) == (2, 5700)
    assert blobs_written_since(str(tmp_path / "missing"), 0) == (0, 0)


class _Span:
    def __init__(self, start_time: int) -> None:
        self.start_time, self.attributes = start_time, {}

    def set_attributes(self, attrs) -> None:
        self.attributes.update(attrs)


def test_hub_download_probe_sets_bytes_files_and_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "huggingface_hub.constants", raising=False)
    span = _Span(time.time_ns() - 2 * 10**9)  # began 2 s ago
    _blob(tmp_path, "org/m", "d" * 64, 4_000_000)
    HubDownload().on_ending(SimpleNamespace(), span)
    a = span.attributes
    assert a[sc.DOWNLOAD_BYTES] == 4_000_000 and a[sc.DOWNLOAD_FILES] == 1
    assert 0.0015 < a[sc.DOWNLOAD_GBPS] <= 0.002  # 4 MB over a little more than 2 s
    hit = _Span(time.time_ns())  # a hub-cache hit: nothing written during the span
    HubDownload().on_ending(SimpleNamespace(), hit)
    assert hit.attributes == {sc.DOWNLOAD_BYTES: 0, sc.DOWNLOAD_FILES: 0}


def test_filesystem_of_names_the_mount(tmp_path):
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"0")
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    expected = max((m for m in mounts if str(f).startswith(m[1].rstrip("/") + "/") or m[1] == "/"),
                   key=lambda m: len(m[1]))[2]
    assert filesystem_of(str(f)) == expected
    assert filesystem_of("/proc/self/status") == "proc"
