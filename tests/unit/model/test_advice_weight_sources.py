"""Advice for where the weights come from, each fired only by evidence and silent otherwise: a hub download (and
not a hub-cache hit, whose download span measured 0 bytes), a load far below what the storage could do (judged
against a read rate measured elsewhere in the same start when there is one), and a Run:ai streamer reading an object
store slowly. Real recorded starts with the condition planted in their spans: this machine has no object store and
no big slow load of its own (tests/e2e/test_weight_sources.py proves the hub and slow-storage rules on real starts)."""

from __future__ import annotations

import pytest
from recorded import dev, named

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import advice
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start


def _advice(st) -> dict[str, advice.Advice]:
    return {a.rule: a for a in Start(st.spans, st.source).advice}


def _download(st, seconds: float, **attrs) -> Span:
    p = named(st, "Load model")
    s = Span(st.trace_id, "cd" * 8, p.span_id, "Download weights - HF", p.start, p.start + int(seconds * 1e9),
             {sc.PHASE: "weights_download", sc.PROCESS_KIND: p.attrs[sc.PROCESS_KIND], **attrs}, p.resource)
    st.spans.append(s)
    return s


def _load(st, nbytes: int, gbps: float, **attrs) -> Span:
    w = named(st, "Load weights")
    w.attrs.update({sc.WEIGHTS_BYTES: nbytes, sc.WEIGHTS_GBPS: gbps, **attrs})
    w.end = w.start + int(nbytes / gbps)
    return w


def test_hub_download_fires_on_bytes_that_arrived():
    st = dev("eager-warm")
    named(st, "Load weights").attrs.update({sc.WEIGHTS_SOURCE: "hub_download", sc.DOWNLOAD_BYTES: 4_000_000_000})
    _download(st, 40.0, **{sc.DOWNLOAD_BYTES: 4_000_000_000, sc.DOWNLOAD_FILES: 2, sc.DOWNLOAD_GBPS: 0.1})
    a = _advice(st)["hub_download"]
    assert a.saving_s == pytest.approx(40.0) and a.phase == "Download weights - HF"
    assert "4.0 GB" in a.evidence and "0.100 GB/s" in a.evidence
    assert "HF_HUB_OFFLINE=1" in a.change and "volume" in a.change


def test_hub_cache_hit_is_silent_though_vllm_checked_the_hub_for_seconds():
    st = dev("eager-warm")
    named(st, "Load weights").attrs[sc.WEIGHTS_SOURCE] = "hub_cache"
    _download(st, 5.0, **{sc.DOWNLOAD_BYTES: 0, sc.DOWNLOAD_FILES: 0})  # a slow metadata round trip, no bytes
    assert "hub_download" not in _advice(st)


def test_slow_shared_storage_fires_with_the_filesystem_and_reference():
    st = dev("eager-warm")
    w = _load(st, 206_000_000, 0.025, **{sc.WEIGHTS_SOURCE: "local_dir", sc.WEIGHTS_FILESYSTEM: "fuse.slowfs"})
    a = _advice(st)["slow_weights"]
    assert "fuse.slowfs" in a.evidence and "0.025 GB/s" in a.evidence
    assert f"{advice.STREAMER_GBPS:g} GB/s" in a.evidence  # no local read measured here: the field's figure
    assert "local NVMe" in a.change and a.change.startswith("copy the weights")
    assert a.saving_s == pytest.approx(w.duration - 206_000_000 / (advice.STREAMER_GBPS * 1e9))


def test_slow_weights_judged_against_a_read_rate_measured_in_the_same_start():
    st = dev("eager-warm")
    _load(st, 16_000_000_000, 1.2, **{sc.WEIGHTS_SOURCE: "local_dir", sc.WEIGHTS_FILESYSTEM: "ext4"})
    assert "slow_weights" not in _advice(st)  # 1.2 GB/s is over half the field's 2 GB/s: nothing says it is slow
    named(st, "Load model").attrs.update({sc.RES_DISK_READ: 16_500_000_000, sc.RES_DISK_READ_GBPS: 5.0})
    assert "slow_weights" not in _advice(st)  # a span around the load: its reads are the weights' own
    imports = next(s for s in st.spans if s.name == "Imports")
    imports.attrs.update({sc.RES_DISK_READ: 900_000_000, sc.RES_DISK_READ_GBPS: 3.0})
    a = _advice(st)["slow_weights"]  # this start's own disk read at 3 GB/s: the load used 40 % of it
    assert "Imports read 900.0 MB from local storage at 3.00 GB/s" in a.evidence
    assert a.saving_s == pytest.approx(16 / 1.2 - 16 / 3.0, rel=1e-3)
    assert a.change.startswith("stream the weights")  # ext4: not shared storage


@pytest.mark.parametrize("nbytes, gbps", [(206_000_000, 1.5), (50_000_000, 0.001)])
def test_slow_weights_silent_at_storage_speed_or_for_small_loads(nbytes, gbps):
    st = dev("eager-warm")
    _load(st, nbytes, gbps, **{sc.WEIGHTS_SOURCE: "local_dir", sc.WEIGHTS_FILESYSTEM: "fuse.slowfs"})
    assert "slow_weights" not in _advice(st)


def test_streamer_concurrency_fires_for_a_slow_object_store_stream_only():
    st = dev("eager-warm")
    obj = {sc.WEIGHTS_SOURCE: "object_store", sc.WEIGHTS_LOADER: "runai_streamer", sc.WEIGHTS_STREAMER_CONCURRENCY: 8}
    w = _load(st, 16_000_000_000, 0.3, **obj)
    got = _advice(st)
    a = got["streamer_concurrency"]
    assert "slow_weights" not in got  # one piece of advice for one slow load
    assert "(this start: 8)" in a.evidence and "RUNAI_STREAMER_CONCURRENCY" in a.change
    assert a.saving_s == pytest.approx(w.duration - 16 / advice.STREAMER_GBPS)
    w.attrs[sc.WEIGHTS_GBPS] = 1.5
    w.end = w.start + int(16e9 / 1.5)
    assert "streamer_concurrency" not in _advice(st)  # fast enough
    w.attrs.update({sc.WEIGHTS_GBPS: 0.3, sc.WEIGHTS_LOADER: "default"})
    w.end = w.start + int(16e9 / 0.3)
    got = _advice(st)  # an object store read by another loader: not the streamer's concurrency
    assert "streamer_concurrency" not in got and "slow_weights" in got
