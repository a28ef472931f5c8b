"""The agent's side of compile-cache forensics (agent/compile_key.py): which config fields vLLM's compute_hash source
hashes, the nearest cached key from vLLM's factor files and from our digest files (digests only, never values),
and the sibling key directories. The real proof is tests/e2e/test_compile_key.py."""

from __future__ import annotations

import dataclasses
import json
import os

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes import compile_key as ck


# ---- agent side: vLLM's compute_hash source and factor files -------------------------------------------------
@dataclasses.dataclass
class _Sub:
    """A sub-config hashed like vLLM's: get_hash_factors(self, ignored) plus a field read by hand."""

    a: int = 1
    b: int = 2
    ignored: str = "x"

    def compute_hash(self) -> str:
        ignored_factors = {"ignored"}
        factors = get_hash_factors(self, ignored_factors)  # noqa: F821 - only read as source
        factors["extra"] = self.b
        return str(factors)


@dataclasses.dataclass
class _Manual:
    n: int = 3
    m: int = 4

    def compute_hash(self) -> str:
        return str([self.n])


def _factor_file(root, key: str, env: dict, **hashes) -> str:
    local = os.path.join(root, key, "rank_0_0", "backbone")
    os.makedirs(local)
    with open(os.path.join(local, ck.FACTOR_FILE), "w") as f:
        json.dump({"env": env, "config_hash": "c", "code_hash": "k", "compiler_hash": "p", **hashes}, f)
    return local


def test_hashed_parts_read_from_compute_hash_source():
    assert ck.hashed_parts(_Sub)[1] == frozenset({"a", "b"})
    assert ck.hashed_parts(_Manual) == (("n",), None)


def test_nearest_cached_key_from_vllms_factor_files(tmp_path):
    mine = {"env": {"A": 1, "B": "10.0.0.1"}, "config_hash": "c", "code_hash": "k", "compiler_hash": "p"}
    _factor_file(tmp_path, "far", {"A": 2, "B": "10.0.0.2"}, config_hash="c2")
    _factor_file(tmp_path, "near", {"A": 1, "B": "10.0.0.2"})
    local = _factor_file(tmp_path, "mine", mine["env"])
    assert ck.nearest_cached(str(tmp_path / "mine"), local, mine) == ("near", ["env:B"])


def test_nearest_aot_key_from_our_digest_files(tmp_path):
    mine = {"env": {"A": "1"}, "config": {"model_config": {"#": "m", "max_model_len": "x"}},
            "hashes": {"code": "k", "compiler": "p"}}
    other = {**mine, "config": {"model_config": {"#": "m2", "max_model_len": "y"}}}
    for key, d in (("mine", mine), ("other", other)):
        (tmp_path / key).mkdir()
        ck._write_ours(str(tmp_path / key), d)
    assert ck.nearest_ours(str(tmp_path / "mine"), mine) == ("other", ["config:model_config.max_model_len"])
    assert "10.0" not in (tmp_path / "mine" / ck.OUR_FILE).read_text()  # digests only


def test_other_keys_are_the_sibling_key_directories(tmp_path):
    for d in ("mine", "k1", "k2", ".tmp", "torch_aot_compile"):
        (tmp_path / d).mkdir()
    (tmp_path / "stray-file").write_text("")
    assert ck._other_keys(str(tmp_path / "mine")) == {sc.COMPILE_OTHER_KEYS: 2}
    assert ck._other_keys(str(tmp_path / "absent" / "mine")) == {}  # unreadable root: not recorded
