"""Redaction (model/redact.py): names, command lines, JSON values, URLs, free text and the environment's
secrets; a property-style run over generated command lines and exception texts with planted secrets; and
what must be left alone (a redaction that blanks ordinary values hides the start it is meant to explain)."""

from __future__ import annotations

import os
import subprocess
import sys

import planted
import pytest

from vllm_otel_startup.model import redact
from vllm_otel_startup.model.argv import model_from_argv, model_name
from vllm_otel_startup.model.redact import REDACTED, redact_argv, redact_url, scrub, sensitive

R = REDACTED


@pytest.fixture
def env(monkeypatch):
    """Set environment variables and have the scrub collect the environment's secrets again."""
    def _set(**values: str) -> None:
        for k, v in values.items():
            monkeypatch.setenv(k, v)
        redact.forget_env()

    yield _set
    redact.forget_env()


@pytest.mark.parametrize("name", [
    "--api-key", "--hf-token", "api_key", "apiKey", "APIKey", "HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "client_secret", "secrets", "password", "db-passwd", "passphrase",
    "credentials", "Authorization", "x-auth", "authToken", "cookie", "sig", "X-Amz-Signature", "X-Amz-Credential",
    "X-Amz-Security-Token", "key", "accessToken", "--kv-transfer-config.kv_connector_extra_config.auth_token",
])
def test_secret_names(name):
    assert sensitive(name)


@pytest.mark.parametrize("name", [
    "--tokenizer", "--tokenizer-mode", "--max-num-batched-tokens", "--skip-tokenizer-init", "bos_token_id",
    "eos_token_id", "--long-prefill-token-threshold", "HF_TOKEN_PATH", "pass_config", "--ssl-keyfile", "author",
    "authority", "--enable-auto-tool-choice", "--kv-cache-dtype", "signal", "max_tokens", "--served-model-name",
    "kv_connector", "--model", "keyfile",
])
def test_ordinary_names(name):
    assert not sensitive(name)


@pytest.mark.parametrize("argv, expected", [
    (["--api-key", "k1"], ["--api-key", R]),
    (["--api-key=k1"], [f"--api-key={R}"]),
    (["--api-key", "k1", "k2", "--port", "8000"], ["--api-key", R, R, "--port", "8000"]),  # nargs='+'
    (["--skip-tokenizer-init", "--model", "m"], ["--skip-tokenizer-init", "--model", "m"]),  # a switch hides nothing
    (["--max-num-batched-tokens", "2048", "--tokenizer", "org/tok"],
     ["--max-num-batched-tokens", "2048", "--tokenizer", "org/tok"]),
    (["--hf-overrides", '{"auth_token": "s1", "bos_token_id": 1, "nested": {"url": "https://u:s2@h/x"}}'],
     ["--hf-overrides", '{"auth_token":"<redacted>","bos_token_id":1,"nested":{"url":"https://<redacted>@h/x"}}']),
    (['--kv-transfer-config={"kv_connector_extra_config": {"api_key": "s3"}, "kv_role": "kv_both"}'],
     ['--kv-transfer-config={"kv_connector_extra_config":{"api_key":"<redacted>"},"kv_role":"kv_both"}']),
    (["--compilation-config", '{"pass_config": {"enable_fusion": true}}'],
     ["--compilation-config", '{"pass_config": {"enable_fusion": true}}']),  # nothing secret: as given
    (["--hf-overrides.auth_token", "s4"], ["--hf-overrides.auth_token", R]),
    (["--allowed-origins", '["https://admin:p@ss@example.invalid"]'], ["--allowed-origins", f'["https://{R}@example.invalid"]']),
    (["-tp", "2", "--long-prefill-token-threshold", "-1"], ["-tp", "2", "--long-prefill-token-threshold", "-1"]),
])
def test_command_lines(argv, expected):
    assert redact_argv(argv) == expected


@pytest.mark.parametrize("url, expected", [
    ("https://user:pw@host/x", f"https://{R}@host/x"),
    ("https://user:p@ss@host/x", f"https://{R}@host/x"),  # leaked 'ss' before
    ("https://user:pa/ss@host/x", f"https://{R}@host/x"),  # was not redacted before
    ("https://tok3n@host/x", f"https://{R}@host/x"),
    ("https://u:pw@host/path@v2", f"https://{R}@host/path@v2"),
    ("user:pass@db:5432", f"{R}@db:5432"),  # scheme-less: was not redacted before
    ("connect user:p@ss@db:5432/app now", f"connect {R}@db:5432/app now"),
    ("https://h/m?token=t1&rev=main&sig=s1#f", f"https://h/m?token={R}&rev=main&sig={R}#f"),  # kept before
    ("https://h/o?X-Amz-Signature=a&X-Amz-Credential=b&X-Amz-Date=1", f"https://h/o?X-Amz-Signature={R}"
                                                                        f"&X-Amz-Credential={R}&X-Amz-Date=1"),
    ("s3://bucket/path@v2", "s3://bucket/path@v2"),
    ("mail bob@example.com", "mail bob@example.com"),
    ("/models/llama", "/models/llama"),
    ("https://host/search?q=llama", "https://host/search?q=llama"),
])
def test_urls(url, expected):
    assert redact_url(url) == expected


@pytest.mark.parametrize("text, expected", [
    ("api_key=sk-abc123 failed", f"api_key={R} failed"),
    ('{"hf_token": "hf_x1", "max_tokens": 5}', f'{{"hf_token": "{R}", "max_tokens": 5}}'),
    ("{'password': 'a b c'}", f"{{'password': '{R}'}}"),
    ("Authorization: Bearer abcdefgh12345", f"Authorization: {R} {R}"),
    ("Basic dXNlcjpwYXNz", f"Basic {R}"),
    ("KeyError: 'model.layers.0.weight'", "KeyError: 'model.layers.0.weight'"),  # a lone 'key' is not a secret
    ("basic configuration; bearer authentication", "basic configuration; bearer authentication"),
    ("token embeddings, bos_token_id=1, max_tokens: 16", "token embeddings, bos_token_id=1, max_tokens: 16"),
    ("File \"/x/loader.py\", line 12, in load", "File \"/x/loader.py\", line 12, in load"),
    ("api_key: ['sk-1', 'sk-2']", f"api_key: [{R}]"),
    ("vllm serve m --api-key k1 k2 --port 8000\nnext line", f"vllm serve m --api-key {R} {R} --port 8000\nnext line"),
    ("argv: ['vllm', '--hf-token', 'hf_1', '--dtype', 'auto']",
     f"argv: ['vllm', '--hf-token', '{R}', '--dtype', 'auto']"),
    ("site-packages/vllm-0.32/x.py: a - b", "site-packages/vllm-0.32/x.py: a - b"),
])
def test_free_text(text, expected):
    assert scrub(text) == expected


def test_the_environments_secrets_are_scrubbed_from_any_string(env):
    env(HF_TOKEN="hf_envTokenValue1", MY_SERVICE_API_KEY="svc-key-0123456", AWS_ACCESS_KEY_ID="AKIAEXAMPLE123",
        DATABASE_URL="postgres://app:dbPassw0rd99@db:5432/x", SHORT_TOKEN="abc", AWS_REGION="us-east-1x",
        PWD="/srv/work/directory",
        OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20sk-hdr-secret9,x-tenant=acme")
    text = ("open /cache/hf_envTokenValue1/x with svc-key-0123456 as AKIAEXAMPLE123; dbPassw0rd99; "
            "sk-hdr-secret9; abc; us-east-1x; acme; /srv/work/directory")
    out = scrub(text)
    for s in ("hf_envTokenValue1", "svc-key-0123456", "AKIAEXAMPLE123", "dbPassw0rd99", "sk-hdr-secret9"):
        assert s not in out
    # short values, ordinary variables and the working directory ($PWD: not a password) are left alone
    assert out.endswith("; abc; us-east-1x; acme; /srv/work/directory")


@pytest.mark.parametrize("model, name", [
    ("/home/alice/private/models/llama-3-8b/", "llama-3-8b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("s3://AKIA:secret@bucket/models/llama?X-Amz-Signature=x", "llama"),
    ("https://u:p@hf.example/org/model?token=t", "model"),
    ("./tiny", "tiny"),
    ("user:pw@host/models/x", "x"),
    ("gs://bucket", "bucket"),
])
def test_the_model_label_is_the_models_name(model, name):
    assert model_name(model) == name


def test_the_model_from_the_command_line_is_scrubbed():
    assert model_from_argv(["vllm", "serve", "--model=s3://k:secret@bucket/m"]) == f"s3://{R}@bucket/m"
    assert model_from_argv(["vllm", "serve", "https://h/m?sig=abc"]) == f"https://h/m?sig={R}"


def test_property_no_planted_secret_survives_redaction(env):
    """Generated command lines and exception texts (seeded, tests/unit/planted.py): none of the planted
    secrets survives ``redact_argv`` or ``scrub``, and scrubbing twice changes nothing."""
    cases = planted.cases(400)
    for case in cases:
        env(**case.env)
        argv = redact_argv(case.argv)
        out = " ".join(argv) + "\n" + "\n".join(scrub(t) for t in case.texts)
        assert not case.leaked(out), (case.seed, case.argv, out)
        assert scrub(out) == out, case.seed
        assert argv[:3] == case.argv[:3]  # the program and the subcommand stay readable
    assert sum(len(c.secrets) for c in cases) > 1000


def test_ordinary_command_lines_are_left_alone():
    """Nothing of a command line without secrets changes."""
    for args in planted.BENIGN_ARGS:
        assert redact_argv(list(args)) == list(args)


def test_importing_the_module_costs_well_under_a_millisecond(tmp_path):
    """It is imported at every interpreter start: it imports nothing new, compiles no regular expression and
    reads no environment at import. Measured from bytecode, as an installed package is imported."""
    import compileall
    import shutil
    from pathlib import Path

    import vllm_otel_startup

    pkg = tmp_path / "vllm_otel_startup"
    shutil.copytree(Path(vllm_otel_startup.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(pkg), quiet=1)
    code = ("import sys, time, vllm_otel_startup.model; before = set(sys.modules); t = time.perf_counter(); "
            "import vllm_otel_startup.model.redact as r; d = time.perf_counter() - t; "
            "print(d, len(r._compiled), r.env_secrets.cache_info().currsize, *sorted(set(sys.modules) - before))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                           cwd=tmp_path).stdout.split() for _ in range(5)]
    assert all(r[1:] == ["0", "0", "vllm_otel_startup.model.redact"] for r in runs), runs
    assert min(float(r[0]) for r in runs) < 0.002, runs  # ~0.3 ms here
