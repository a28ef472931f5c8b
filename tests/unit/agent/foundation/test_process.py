"""Process identity, creation time and secret hygiene (stdlib only: runs in every Python process)."""

from __future__ import annotations

import time

import psutil

from vllm_otel_startup.agent.foundation import process
from vllm_otel_startup.agent.foundation.process import (
    API_SERVER,
    ENGINE_CORE,
    ENV_KIND,
    HELPER,
    OTHER,
    REDACTED,
    classify,
    create_time_ns,
    redact_argv,
    redact_url,
)


def test_classify_the_process_layout():
    assert classify(["/venv/bin/python", "/venv/bin/vllm", "serve", "m"], {}) == API_SERVER
    assert classify(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], {}) == API_SERVER
    spawned = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
               "--multiprocessing-fork"]
    assert classify(spawned, {ENV_KIND: "engine_core"}) == ENGINE_CORE
    assert classify(spawned, {}) == OTHER  # not ours: left alone
    tracker = ["python", "-B", "-c", "from multiprocessing.resource_tracker import main;main(32)"]
    assert classify(tracker, {ENV_KIND: "engine_core"}) == HELPER
    assert classify(["python", "-m", "torch._inductor.compile_worker", "--workers=2"], {}) == HELPER
    assert classify(["python", "-m", "vllm.model_executor.models.registry"], {}) == HELPER
    isa_probe = ("\nimport sys\nif sys.platform != 'linux':\n    import torch\n"
                 "from ctypes import cdll\ncdll.LoadLibrary('/x.so')")
    assert classify(["python", "-c", isa_probe], {}) == HELPER  # Inductor's vector-ISA probe
    assert classify(["python", "-c", "pass"], {}) == OTHER
    assert classify(["/venv/bin/vllm", "bench", "latency"], {}) == OTHER


def test_creation_time_is_read_from_the_os_to_the_tick():
    ns, source = create_time_ns()
    assert source == "proc"
    assert ns <= time.time_ns()
    # psutil's value is only exact to the second (boot time is whole seconds)
    assert abs(ns / 1e9 - psutil.Process().create_time()) < 1.01


def test_secrets_in_argv_are_redacted():
    argv = ["vllm", "serve", "m", "--api-key", "sk-123", "--hf-token=hf_abc", "--port", "8000",
            "--otlp-traces-endpoint", "https://user:pw@collector:4318", "--client-secret", "s3"]
    out = redact_argv(argv)
    joined = " ".join(out)
    for secret in ("sk-123", "hf_abc", "user:pw", "s3"):
        assert secret not in joined
    assert out[:4] == ["vllm", "serve", "m", "--api-key"] and out[4] == REDACTED
    assert "--hf-token=" + REDACTED in out
    assert "8000" in out and "https://" + REDACTED + "@collector:4318" in out


def test_urls_lose_their_credentials_anywhere():
    assert redact_url("s3://AKIA:secret@bucket/model") == "s3://" + REDACTED + "@bucket/model"
    assert redact_url("/models/llama") == "/models/llama"


def test_model_from_the_command_line_labels_a_start_that_fails_before_its_config():
    from vllm_otel_startup.agent.foundation.process import model_from_argv

    assert model_from_argv(["vllm", "serve", "/models/llama", "--port", "8000"]) == "/models/llama"
    assert model_from_argv(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]) == "m"
    assert model_from_argv(["vllm", "serve", "--model=s3://k:secret@bucket/m"]) == "s3://<redacted>@bucket/m"
    assert model_from_argv(["vllm", "serve", "--help"]) is None


def test_the_start_mode_is_warm_when_vllms_cache_root_holds_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path))
    assert process.vllm_cache_root() == str(tmp_path)
    assert process.start_mode() == "cold"
    (tmp_path / "modelinfos").mkdir()
    assert process.start_mode() == "cold"  # an empty folder is no artifact
    (tmp_path / "modelinfos" / "m.json").write_text("{}")
    assert process.start_mode() == "warm"
    monkeypatch.delenv("VLLM_CACHE_ROOT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert process.vllm_cache_root() == str(tmp_path / "xdg" / "vllm")
    assert process.start_mode() == "cold"
