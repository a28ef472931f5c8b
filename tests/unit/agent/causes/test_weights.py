"""agent/causes/weights.py: where the weights came from, from the loader's own calls (stand-in loaders and real
files here; every real loader: behaviour/test_loaders_fake.py and tests/e2e/test_loaders.py). The span gets the
loader, the load format asked for and the one in effect (and why they differ), the source (a local folder, a hub
download or cache hit, an object store, a daemon, a peer, dummy weights), the files and bytes, the file system, and
the throughput over the span's own duration; the probe starts afresh for the next load."""

from __future__ import annotations

import os
import time
import types

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call, filesystem_of
from vllm_otel_startup.agent.causes.weights import WeightsLoad, _paths
from vllm_otel_startup.agent.foundation.span_store import END_TIMES


class DefaultModelLoader:
    def __init__(self, fmt: str = "auto") -> None:
        self.load_config = types.SimpleNamespace(load_format=fmt)


class DummyModelLoader(DefaultModelLoader):
    pass


class _Span:
    def __init__(self, start_time: int, end_time: int) -> None:
        self.attributes: dict = {}
        self.start_time = start_time
        END_TIMES.set(self, end_time)

    def set_attributes(self, attrs) -> None:
        self.attributes.update(attrs)

    def set_attribute(self, k, v) -> None:
        self.attributes[k] = v


def _rt(create_ns: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(info=types.SimpleNamespace(create_ns=create_ns))


def _prepared(probe: WeightsLoad, rt, loader, folder: str, files: list[str]) -> None:
    probe.after_call(rt, None, Call(None, (), {}, loader, kind="weights_loader"))
    probe.after_call(rt, None, Call(loader, (folder,), {}, (folder, files, True, None), kind="prepare_weights"))


def test_a_local_folders_safetensors_with_bytes_file_system_and_throughput(tmp_path):
    files = [tmp_path / "model-00001.safetensors", tmp_path / "model-00002.safetensors"]
    for f in files:
        f.write_bytes(b"w" * 1000)
    probe, rt = WeightsLoad(), _rt(create_ns=time.time_ns() + 10**12)  # the files predate the start
    _prepared(probe, rt, DefaultModelLoader(), str(tmp_path), [str(f) for f in files])
    span = _Span(10**9, 10**9 + 1_000_000)  # 1 ms
    probe.on_ending(rt, span)
    assert span.attributes == {
        sc.WEIGHTS_LOADER: "default", sc.WEIGHTS_LOAD_FORMAT_REQUESTED: "auto", sc.WEIGHTS_LOAD_FORMAT: "safetensors",
        sc.WEIGHTS_LOAD_FORMAT_REASON: "auto: safetensors files found", sc.WEIGHTS_SOURCE: "local_dir",
        sc.WEIGHTS_FILES: 2, sc.WEIGHTS_BYTES: 2000, sc.WEIGHTS_FILESYSTEM: filesystem_of(str(files[0])),
        sc.WEIGHTS_GBPS: 0.002}
    assert probe.files == {} and probe.loader is None  # afresh for the next load


def test_files_written_during_the_start_are_a_hub_download(tmp_path):
    blob = tmp_path / "blobs" / "abc"
    blob.parent.mkdir()
    blob.write_bytes(b"w" * 500)
    probe, rt = WeightsLoad(), _rt(create_ns=0)  # the start began before the file was written
    _prepared(probe, rt, DefaultModelLoader(), "org/model", [str(blob)])  # a hub id, not a folder
    attrs = probe.attributes()
    assert attrs[sc.WEIGHTS_SOURCE] == "hub_download"
    assert (attrs[sc.DOWNLOAD_BYTES], attrs[sc.DOWNLOAD_FILES]) == (500, 1)
    again, rt_later = WeightsLoad(), _rt(create_ns=time.time_ns() + 10**12)
    _prepared(again, rt_later, DefaultModelLoader(), "org/model", [str(blob)])
    assert again.attributes()[sc.WEIGHTS_SOURCE] == "hub_cache" and sc.DOWNLOAD_BYTES not in again.attributes()


def test_an_object_store_uri_is_the_source_and_the_streamers_sizes_count(monkeypatch):
    monkeypatch.setenv("RUNAI_STREAMER_CONCURRENCY", "16")
    config = types.SimpleNamespace(load_format="runai_streamer")
    streamer = type("RunaiModelStreamerLoader", (), {"load_config": config})()
    probe, rt = WeightsLoad(), _rt(0)
    uri = "s3://bucket/m/model.safetensors"
    probe.after_call(rt, None, Call(None, (), {}, streamer, kind="weights_loader"))
    probe.after_call(rt, None, Call(streamer, (None, [uri]), {}, [(100, None, [400, 500])], kind="streamer_request"))
    attrs = probe.attributes()
    assert attrs[sc.WEIGHTS_SOURCE] == "object_store" and attrs[sc.WEIGHTS_LOADER] == "runai_streamer"
    assert (attrs[sc.WEIGHTS_FILES], attrs[sc.WEIGHTS_BYTES]) == (1, 1000)
    assert attrs[sc.WEIGHTS_STREAMER_CONCURRENCY] == 16 and sc.WEIGHTS_FILESYSTEM not in attrs


def test_dummy_weights_are_zero_bytes_from_no_file():
    probe, rt = WeightsLoad(), _rt(0)
    loader = DummyModelLoader("dummy")
    probe.after_call(rt, None, Call(loader, (None, types.SimpleNamespace(model="m")), {}, None, kind="load_weights"))
    attrs = probe.attributes()
    assert (attrs[sc.WEIGHTS_SOURCE], attrs[sc.WEIGHTS_BYTES], attrs[sc.WEIGHTS_FILES]) == ("dummy", 0, 0)


def test_what_vllm_already_set_on_the_span_is_kept(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"x" * 10)
    probe, rt = WeightsLoad(), _rt(time.time_ns() + 10**12)
    _prepared(probe, rt, DefaultModelLoader("pt"), str(tmp_path), [str(tmp_path / "w.bin")])
    span = _Span(10**9, 2 * 10**9)
    span.attributes[sc.WEIGHTS_LOADER] = "vllms-own"
    probe.on_ending(rt, span)
    assert span.attributes[sc.WEIGHTS_LOADER] == "vllms-own" and span.attributes[sc.WEIGHTS_LOAD_FORMAT] == "pt"


@pytest.mark.parametrize(("value", "paths"), [
    ("/m/a.safetensors", ["/m/a.safetensors"]),
    (["/m/a", "/m/b"], ["/m/a", "/m/b"]),
    (("/m", ["/m/a"], True, None), ["/m/a"]),  # DefaultModelLoader._prepare_weights's tuple
    ((1, 2), None),
    (3, None),
])
def test_paths_in_a_loaders_value(value, paths):
    assert _paths(value) == paths


def test_a_path_object_is_a_path(tmp_path):
    assert _paths([tmp_path / "a"]) == [os.fspath(tmp_path / "a")]
