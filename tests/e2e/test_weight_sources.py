"""Weights from the hub and from slow storage, measured on real `vllm serve` starts (conftest.py's session starts):

- hub download: `vllm serve ORG/NAME` against a hub-protocol server on 127.0.0.1 (support/hub_server.py: a minimal
  standard-library server for the endpoints huggingface_hub calls, since olah cannot serve a local repository
  offline; its docstring says why) that paces every file at HUB_RATE. The `Download weights - HF` span carries the
  bytes, files and GB/s of what arrived in the hub cache during it: within 15 % of the rate the server delivered
  (the limit on an idle host, less on a starved one).
- the same start again with the same HF_HOME: the weights come from the hub cache, nothing is downloaded, and
  `vllm-otel-startup compare` says so.
- slow shared storage: the model on a throttled FUSE passthrough mount (support/slow_fs.py) at SLOW_RATE: `Load
  weights` GB/s reflects the limit and the slow-storage advice fires with its evidence; on the local-disk start
  (the hub-cache one) it stays silent.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_params import HUB_RATE, SLOW_RATE

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import compare, sources
from vllm_otel_startup.model.advice import advise
from vllm_otel_startup.model.facts import facts, human_bytes, link

pytestmark = pytest.mark.e2e

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _start(obs) -> sources.Start:
    return sources.one(str(obs.start.trace_file_dir / f"{obs.root.trace_id}.jsonl"))


def _advice(obs) -> dict:
    st = _start(obs)
    return {a.rule: a for a in advise(facts(link(st.spans), st.spans), st.spans)}


def _weights_file(model: Path) -> int:
    return (model / "model.safetensors").stat().st_size


def test_download_span_measures_the_hub_limit(hub_download, padded_model):
    dl = hub_download.one("Download weights - HF")
    size = _weights_file(padded_model)
    assert dl.attrs[sc.DOWNLOAD_FILES] == 1 and dl.attrs[sc.DOWNLOAD_BYTES] == size, dl.attrs
    gbps = dl.attrs[sc.DOWNLOAD_GBPS]
    sent = hub_download.hub_sends["model.safetensors"]
    assert sent["bytes"] == size, sent
    link = size / sent["seconds"] / 1e9  # what the server delivered: the limit, or less on a starved host
    err = gbps / link - 1
    print(f"hub limit {HUB_RATE / 1e9:.3f} GB/s, delivered {link:.4f} GB/s in {sent['seconds']:.2f} s, "
          f"download span {gbps:.4f} GB/s ({100 * err:+.1f} %), {size} bytes in {dl.duration:.2f} s")
    assert link <= 1.02 * HUB_RATE / 1e9  # the limit held (its 1 MiB burst is 0.5 % of the file)
    # the span holds the transfer and vLLM's few metadata requests around it: its rate is the link's, a little under
    # (-3 to -11 % against the limit on the development host, -24 % once on a slower CI host, delivery not recorded)
    assert -0.15 <= err <= 0.01
    assert hub_download.hub_bytes_sent >= size  # the server did send them (plus config and tokenizer files)
    w = hub_download.one("Load weights")
    assert w.attrs[sc.WEIGHTS_SOURCE] == "hub_download" and w.attrs[sc.DOWNLOAD_BYTES] == size


def test_second_start_hits_the_hub_cache(hub_cached):
    w = hub_cached.one("Load weights")
    assert w.attrs[sc.WEIGHTS_SOURCE] == "hub_cache", w.attrs
    assert sc.DOWNLOAD_BYTES not in w.attrs
    dl = hub_cached.one("Download weights - HF")  # vLLM still asks the hub what the repo holds
    assert dl.attrs[sc.DOWNLOAD_BYTES] == 0 and dl.attrs[sc.DOWNLOAD_FILES] == 0
    assert sc.DOWNLOAD_GBPS not in dl.attrs
    assert hub_cached.hub_bytes_sent < 1e6  # metadata only: no weight file went over the wire


def test_compare_says_the_weights_came_from_the_hub_cache(hub_download, hub_cached, padded_model):
    a, b = _start(hub_download), _start(hub_cached)
    heads = compare.headlines(compare.compare([a], [b]))
    assert any("weights source hub_download → hub_cache" in h for h in heads), heads
    p = subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", "compare", a.source, b.source],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    print(p.stdout)
    assert p.returncode == 0, p.stderr
    assert "weights source hub_download → hub_cache" in p.stdout
    assert f"hub download {human_bytes(_weights_file(padded_model))} → none (hub cache)" in p.stdout


def test_hub_download_advice_fires_on_the_download_only(hub_download, hub_cached, padded_model):
    a = _advice(hub_download).get("hub_download")
    assert a is not None, _advice(hub_download)
    dl = hub_download.one("Download weights - HF")
    assert a.saving_s == pytest.approx(dl.duration, rel=0.01)
    assert human_bytes(_weights_file(padded_model)) in a.evidence and "GB/s" in a.evidence
    assert "HF_HUB_OFFLINE=1" in a.change
    print(a.lines())
    assert "hub_download" not in _advice(hub_cached)


def test_slow_storage_load_reflects_the_limit_and_the_advice_fires(slow_storage, hub_cached, padded_model):
    w = slow_storage.one("Load weights")
    assert w.attrs[sc.WEIGHTS_SOURCE] == "local_dir" and w.attrs[sc.WEIGHTS_BYTES] == _weights_file(padded_model)
    assert w.attrs[sc.WEIGHTS_FILESYSTEM] == "fuse.slowfs"
    gbps = w.attrs[sc.WEIGHTS_GBPS]
    err = gbps / (SLOW_RATE / 1e9) - 1
    print(f"FUSE limit {SLOW_RATE / 1e9:.3f} GB/s, Load weights {gbps:.4f} GB/s ({100 * err:+.1f} %), "
          f"{w.duration:.2f} s")
    assert -0.15 <= err <= 0.05  # the load cannot beat the link; its own work (copying into the model) costs a bit
    a = _advice(slow_storage).get("slow_weights")
    assert a is not None, _advice(slow_storage)
    print(a.lines())
    assert "fuse.slowfs" in a.evidence and a.saving_s > 0.8 * w.duration
    local = hub_cached.one("Load weights")
    # the same bytes from local disk, not held to the link's rate: a CPU-bound copy, 0.34-0.60 GB/s on the development
    # host and 0.068-0.084 GB/s on a slow or busy one (twice in ten full runs)
    assert local.attrs[sc.WEIGHTS_GBPS] > 2 * gbps
    assert local.attrs[sc.RES_CORES_AVG] > 2 * w.attrs[sc.RES_CORES_AVG]  # the slow one waits on its link
    assert "slow_weights" not in _advice(hub_cached)
