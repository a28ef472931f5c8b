"""model/argv.py: the model a ``vllm serve`` command line names, and its name as a metric label (never a local
path, a URL, its query or its credentials)."""

from __future__ import annotations

import pytest

from vllm_otel_startup.model.argv import model_from_argv, model_name


@pytest.mark.parametrize(("argv", "model"), [
    (["vllm", "serve", "org/m", "--dtype", "f16"], "org/m"),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/data/m"], "/data/m"),
    (["vllm", "serve", "--model=org/m"], "org/m"),
    (["vllm", "serve", "--port", "8000"], None),  # an option is not a model
    (["vllm", "serve"], None),
    ("vllm serve m", None),  # not a list
    (None, None),
])
def test_the_model_a_command_line_names(argv, model):
    assert model_from_argv(argv) == model


@pytest.mark.parametrize(("model", "label"), [
    ("meta-llama/Llama-3-8B", "meta-llama/Llama-3-8B"),  # a hub id as it is
    ("/data/models/llama-3-8b/", "llama-3-8b"),
    ("./models/tiny", "tiny"),
    ("s3://bucket/m/llama?sig=abc", "llama"),
    ("https://user:pw@host/models/qwen#frag", "qwen"),
    (None, ""),
])
def test_the_metric_label_is_a_hub_id_or_the_last_path_component(model, label):
    assert model_name(model) == label
