"""Weights throughput per load format on this machine (never asserted in tests): one real
`opentelemetry-instrument vllm serve` per format of a model built offline (make_tiny_model.py, default hidden 1024,
4 layers: ~150 MB float32), each Load weights span read back from the start's local OTLP-JSON file.

Formats: auto (default loader), runai_streamer (local files, and s3:// from moto's S3 server on 127.0.0.1 with
fake credentials), tensorizer, sharded_state, runai_streamer_sharded, dummy. The tensorizer / sharded artifacts
are made by vLLM's own serializers (support/loader_artifacts.py). Page cache warm: every format's bytes were
read just before (by the serializer, the upload, or the previous start), so this is CPU-side load speed, not disk.

    python -m benchmarks loaders [--hidden 1024] [--layers 4] [--out FILE]
Run it with the e2e venv's python after tests/e2e/bootstrap.sh and tests/e2e/bootstrap_loaders.sh.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from benchmarks import command_parser
from support import harness
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.spanmodel import parse_otlp

REPO = Path(__file__).resolve().parents[1]

FAKE_S3 = {"AWS_ACCESS_KEY_ID": "AKIABENCHFAKE", "AWS_SECRET_ACCESS_KEY": "bench-fake-secret",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0"}


def weights_span(start: harness.Start) -> dict:
    spans = [s for f in start.trace_file_dir.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip()
             for s in parse_otlp(json.loads(line)) if s.name == "Load weights"]
    assert len(spans) == 1, f"{len(spans)} Load weights spans"
    s = spans[0]
    return {**s.attrs, "seconds": (s.end - s.start) / 1e9}


def main(argv: list[str] | None = None) -> None:
    ap = command_parser("loaders", __doc__)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--only", nargs="*", help="format labels to run (default: all)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-loaders-"))
    model = work / "model"
    harness.make_tiny_model(model, "--hidden", str(a.hidden), "--layers", str(a.layers))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VLLM_"))}
    env.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=str(work / "vc"), TMPDIR=str(work))
    subprocess.run([harness.python(), str(REPO / "support/loader_artifacts.py"), str(model), str(work / "art")],
                   check=True, capture_output=True, env=env)
    port = harness.free_port()
    url = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen([str(harness.VENV / "bin/moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    s3 = {**FAKE_S3, "AWS_ENDPOINT_URL": url, "RUNAI_STREAMER_S3_ENDPOINT": url}
    rows = []
    try:
        harness.wait_until(lambda: harness.http_get(url)[0] != 0, 60, "moto")
        upload = ("import boto3, pathlib, sys\ns3 = boto3.client('s3')\ns3.create_bucket(Bucket='models')\n"
                  "for f in pathlib.Path(sys.argv[1]).iterdir():\n"
                  "    s3.upload_file(str(f), 'models', 'm/' + f.name)\n")
        subprocess.run([harness.python(), "-c", upload, str(model)], check=True, env={**os.environ, **s3})
        cases = [("auto", model, [], {}), ("runai_streamer", model, ["--load-format", "runai_streamer"], {}),
                 ("runai_streamer (s3)", "s3://models/m", [], s3),
                 ("tensorizer", work / "art/tensorizer", ["--load-format", "tensorizer"], {}),
                 ("sharded_state", work / "art/sharded", ["--load-format", "sharded_state"], {}),
                 ("runai_streamer_sharded", work / "art/sharded", ["--load-format", "runai_streamer_sharded"], {}),
                 ("dummy", model, ["--load-format", "dummy"], {})]
        for i, (label, path, args, extra) in enumerate(cases):
            if a.only and label not in a.only:
                continue
            try:
                start = harness.serve(path, work / f"s{i}", None, args=["--enforce-eager", *args],
                                      env={"OTEL_TRACES_EXPORTER": "vllm_startup_file", **extra})
                w = weights_span(start)
            except (AssertionError, TimeoutError) as e:  # one format failing does not lose the others' figures
                print(json.dumps({"format": label, "error": str(e)[-300:]}), flush=True)
                continue
            row = {"format": label, "loader": w.get(sc.WEIGHTS_LOADER), "source": w.get(sc.WEIGHTS_SOURCE),
                   "bytes": w.get(sc.WEIGHTS_BYTES), "files": w.get(sc.WEIGHTS_FILES),
                   "seconds": round(w["seconds"], 3), "gbps": w.get(sc.WEIGHTS_GBPS)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        harness.stop_process(moto)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
