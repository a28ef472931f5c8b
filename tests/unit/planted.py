"""Generated command lines and exception texts with planted secrets, for the property-style redaction tests.

A seeded random generator (``hypothesis`` is not installable into the shared test environment): each case
is reproducible from its seed, and a failing case names it. Every planted secret is a fresh random string
(``zq`` + letters and digits) that cannot occur in a string by chance; a password with ``@`` or ``/`` in it
is planted as two such strings around that character, and both must be gone.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field

SECRET_FLAGS = ("--api-key", "--hf-token", "--client-secret", "--db-password", "--x-auth-token", "--signing-key",
                "--aws-secret-access-key", "--ssl-keyfile-password", "--credentials",
                "--kv-transfer-config.kv_connector_extra_config.auth_token")
JSON_FLAGS = ("--hf-overrides", "--override-generation-config", "--kv-transfer-config", "--speculative-config",
              "--compilation-config", "--model-loader-extra-config")
SECRET_KEYS = ("api_key", "apiKey", "token", "auth_token", "hf_token", "password", "secret", "client_secret",
               "aws_secret_access_key", "Authorization", "accessToken", "private_key", "sas_sig", "passwd")
BENIGN_KEYS = ("kv_connector", "endpoint", "url", "remote", "note", "path", "backend", "model")
BENIGN_ARGS = (["--port", "8000"], ["--max-model-len", "4096"], ["--dtype", "bfloat16"], ["--enforce-eager"],
               ["--max-num-batched-tokens", "2048"], ["--tokenizer", "org/tok"], ["--skip-tokenizer-init"],
               ["--compilation-config", '{"pass_config": {"enable_fusion": true}, "level": 3}'],
               ["--hf-overrides", '{"bos_token_id": 1, "eos_token_id": [2, 3]}'], ["-tp", "2"],
               ["--long-prefill-token-threshold", "-1"], ["--served-model-name", "llama"])
ENV_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "MY_SERVICE_API_KEY", "AWS_SECRET_ACCESS_KEY",
             "AWS_SESSION_TOKEN", "DB_PASSWORD", "GITHUB_TOKEN", "S3_SECRET", "WANDB_API_KEY")


def secret(rng: random.Random) -> str:
    return "zq" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(10, 22)))


@dataclass
class Case:
    seed: int
    argv: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # exception messages and other free text
    secrets: list[str] = field(default_factory=list)  # none of these may survive
    env: dict[str, str] = field(default_factory=dict)  # to set before scrubbing (its values are secrets too)
    model: str = "/models/llama"  # the model as vLLM's config names it (may be a URL with credentials)

    def leaked(self, text: str) -> list[str]:
        return [s for s in self.secrets if s in text]


def _url_with(rng: random.Random, case: Case) -> str:
    """A URL carrying a planted secret in one of the forms seen in the wild."""
    a, b = secret(rng), secret(rng)
    host = rng.choice(["example.invalid", "10.0.0.7:5432", "s3.amazonaws.com", "db.internal:6379"])
    path = rng.choice(["", "/v1", "/bucket/model", "/org/model?rev=main"])
    forms = [
        (f"https://user:{a}@{host}{path}", [a]),
        (f"https://user:{a}@{b}@{host}{path}", [a, b]),  # '@' inside the password, unencoded
        (f"https://user:{a}/{b}@{host}{path}", [a, b]),  # '/' inside the password, unencoded
        (f"https://{a}@{host}{path}", [a]),  # a token as the user name
        (f"redis://:{a}@{host}", [a]),
        (f"user:{a}@{host}", [a]),  # scheme-less
        (f"user:{a}@{b}@db.internal:5432/app", [a, b]),
        (f"https://{host}/m?token={a}&rev=main", [a]),
        (f"https://{host}/m?rev=main&sig={a}", [a]),
        (f"https://{host}/o?X-Amz-Credential={a}%2F20240101&X-Amz-Signature={b}", [a, b]),
        (f"https://{host}/o?se=2030&sp=r&sig={a}#frag", [a]),
        (f"https://{host}/o?access_token={a}", [a]),
        (f"s3://{a}:{b}@bucket/models/llama", [a, b]),
    ]
    url, planted = rng.choice(forms)
    case.secrets += planted
    return url


def _json_with(rng: random.Random, case: Case) -> str:
    s = secret(rng)
    leaf: object = s
    if rng.random() < 0.3:
        leaf = _url_with(rng, case)
        key = rng.choice(BENIGN_KEYS)
    else:
        case.secrets.append(s)
        key = rng.choice(SECRET_KEYS)
        if rng.random() < 0.2:
            leaf = [s, "second"]
    doc: object = {key: leaf, rng.choice(BENIGN_KEYS): "kv_both", "n": rng.randint(0, 9)}
    for _ in range(rng.randint(0, 3)):  # nested at a random depth
        doc = {rng.choice(BENIGN_KEYS + ("kv_connector_extra_config",)): doc}
    return json.dumps(doc)


def _env_secret(rng: random.Random, case: Case) -> str:
    name = rng.choice(ENV_NAMES)
    value = case.env.setdefault(name, secret(rng))
    case.secrets.append(value)
    return value


def _fragment(rng: random.Random, case: Case) -> list[str]:
    kind = rng.randrange(7)
    if kind == 0:  # --flag value, --flag=value
        s = secret(rng)
        case.secrets.append(s)
        flag = rng.choice(SECRET_FLAGS)
        return [f"{flag}={s}"] if rng.random() < 0.5 else [flag, s]
    if kind == 1:  # a list-valued secret flag: --api-key K1 K2
        keys = [secret(rng) for _ in range(rng.randint(2, 3))]
        case.secrets += keys
        return ["--api-key", *keys]
    if kind == 2:  # a JSON value holding a secret
        flag, value = rng.choice(JSON_FLAGS), _json_with(rng, case)
        return [f"{flag}={value}"] if rng.random() < 0.5 else [flag, value]
    if kind == 3:  # a URL with credentials as a plain flag's value
        flag = rng.choice(["--otlp-traces-endpoint", "--allowed-origins", "--download-dir", "--root-path"])
        return [flag, _url_with(rng, case)]
    if kind == 4:  # a URL inside a JSON list
        return ["--allowed-origins", json.dumps([_url_with(rng, case), "https://ok.example"])]
    if kind == 5:  # a value that is only known to be secret from the environment
        return ["--served-model-name", _env_secret(rng, case)]
    s = secret(rng)  # a dotted JSON sub-flag
    case.secrets.append(s)
    return [f"--hf-overrides.{rng.choice(SECRET_KEYS)}", s]


def _text(rng: random.Random, case: Case) -> str:
    templates = [
        lambda: f"ConnectionError: cannot reach {_url_with(rng, case)}: timed out",
        lambda: f"HTTPError 403 for url: {_url_with(rng, case)}",
        lambda: f"401 Unauthorized: token={_plant(rng, case)}",
        lambda: f"bad config {{'api_key': '{_plant(rng, case)}', 'max_tokens': 16}}",
        lambda: f'ValueError: {{"hf_token": "{_plant(rng, case)}", "bos_token_id": 1}}',
        lambda: f"request failed (Authorization: Bearer {_plant(rng, case)})",
        lambda: f"OSError: [Errno 2] No such file or directory: '/data/{_env_secret(rng, case)}/config.json'",
        lambda: f"client_secret={_plant(rng, case)}&grant_type=client_credentials",
        lambda: f"could not connect to {_url_with(rng, case)} (password={_plant(rng, case)})",
        lambda: f"header x-api-key: {_plant(rng, case)}",
    ]
    return rng.choice(templates)()


def _plant(rng: random.Random, case: Case) -> str:
    s = secret(rng)
    case.secrets.append(s)
    return s


def case(seed: int) -> Case:
    rng = random.Random(seed)
    c = Case(seed)
    argv = ["/venv/bin/python", "/venv/bin/vllm", "serve"]
    if rng.random() < 0.3:
        c.model = _url_with(rng, c)
    argv.append(c.model)
    parts = [list(rng.choice(BENIGN_ARGS)) for _ in range(rng.randint(0, 4))]
    parts += [_fragment(rng, c) for _ in range(rng.randint(1, 4))]
    rng.shuffle(parts)
    for p in parts:
        argv += p
    c.argv = argv
    c.texts = [_text(rng, c) for _ in range(rng.randint(1, 3))]
    return c


def cases(n: int, base: int = 1000) -> list[Case]:
    return [case(base + i) for i in range(n)]
