"""Compile-cache forensics with span fixtures (fast feedback; the real proof is tests/e2e/test_compile_key.py):
the advice fires and names each factor kind (env var, config field, code, compiler, vLLM version) or stays
silent, compare names the factor between two keys, and the agent side reads vLLM's compute_hash source and
its factor files the way vLLM writes them."""

from __future__ import annotations

import json

import pytest
from recorded import dev, named

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import compare as cmp
from vllm_otel_startup.model import compile_factors as cf
from vllm_otel_startup.model.start import Start

BASE_ENV = {"VLLM_P2P_SIDE_CHANNEL_HOST": "aaaaaa", "VLLM_USE_AOT_COMPILE": "bbbbbb"}
BASE_CFG = {"model_config": {"#": "m1", "max_model_len": "111111", "dtype": "222222"},
            "scheduler_config": {"#": "s1", "max_num_seqs": "333333"}, "vllm": {"#": "v1"}}
HASHES = {"env": "e1", "config": "c1", "code": "k1", "compiler": "p1"}


def _attrs(key: str, hashes=None, env=None, cfg=None, changed=None, nearest=None) -> dict:
    h = {**HASHES, **(hashes or {})}
    a = {sc.COMPILE_CACHE_KEY: key, sc.COMPILE_FACTOR_ENV: h["env"], sc.COMPILE_FACTOR_CONFIG: h["config"],
         sc.COMPILE_FACTOR_CODE: h["code"], sc.COMPILE_FACTOR_COMPILER: h["compiler"],
         sc.COMPILE_FACTOR_ENV_DIGEST: json.dumps(env or BASE_ENV),
         sc.COMPILE_FACTOR_CONFIG_DIGEST: json.dumps(cfg or BASE_CFG), sc.COMPILE_FACTORS_SOURCE: "test"}
    if changed is not None:
        a[sc.COMPILE_CHANGED_FACTORS] = changed
        a[sc.COMPILE_NEAREST_KEY] = nearest or "k0"
    return a


def _warm_miss(**attrs) -> Start:
    """The real compiled-warm start, its torch.compile planted as a miss with a key."""
    st = dev("compiled-warm")
    comp = named(st, "torch.compile")
    comp.attrs[sc.COMPILE_CACHE_HIT] = False
    comp.attrs.update(_attrs("k1", **attrs))
    return Start(st.spans, st.source)


def _key_advice(st: Start):
    return next((a for a in st.advice if a.rule == "compile_key_changed"), None)


def test_advice_names_the_env_var_and_what_to_pin():
    a = _key_advice(_warm_miss(changed=["env:VLLM_P2P_SIDE_CHANNEL_HOST"], nearest="k0"))
    assert a is not None
    assert "nearest key cached on this root is k0: env VLLM_P2P_SIDE_CHANNEL_HOST differs" in a.evidence
    assert "VLLM_P2P_SIDE_CHANNEL_HOST differs between starts" in a.change and "pin it" in a.change


def test_advice_names_the_config_field():
    a = _key_advice(_warm_miss(changed=["config:model_config.max_model_len"]))
    assert "config model_config.max_model_len differs" in a.evidence
    assert "the config differs in model_config.max_model_len" in a.change


@pytest.mark.parametrize(("changed", "words"), [
    (["code"], "the traced vLLM/model source changed"),
    (["compiler"], "the same torch version and Inductor configuration"),
    (["config:vllm"], "a different vLLM version"),
    (["env"], "keep the environment"),
])
def test_advice_names_every_factor_kind(changed, words):
    a = _key_advice(_warm_miss(changed=changed))
    assert a is not None and words in a.change, a.change


def test_advice_without_a_nearest_key_is_the_generic_one_with_the_key():
    a = _key_advice(_warm_miss())
    assert "key k1 (no other key with a factor file on this root)" in a.evidence
    assert "keep vLLM and torch versions" in a.change


def test_advice_silent_on_a_hit_and_on_a_cold_root():
    st = dev("compiled-warm")
    named(st, "torch.compile").attrs.update(_attrs("k1", changed=["env:X"]))  # a hit: nothing to explain
    assert _key_advice(Start(st.spans, st.source)) is None
    cold = dev("compiled-cold")
    named(cold, "torch.compile").attrs.update(_attrs("k1", changed=["env:X"]))
    assert _key_advice(Start(cold.spans, cold.source)) is None  # empty root: fresh_cache_root instead


def _info(**kw) -> cf.KeyInfo:
    st = dev("compiled-warm")
    named(st, "torch.compile").attrs.update(_attrs(**kw))
    info = cf.key_info(st.spans)
    assert info is not None
    return info


def test_key_diff_per_factor_kind():
    base = _info(key="k0")
    assert cf.key_diff(base, _info(key="k0")) == []
    env = _info(key="k1", hashes={"env": "e2"}, env={**BASE_ENV, "VLLM_P2P_SIDE_CHANNEL_HOST": "cccccc"})
    assert cf.key_diff(base, env) == ["env VLLM_P2P_SIDE_CHANNEL_HOST"]
    cfg = {**BASE_CFG, "model_config": {**BASE_CFG["model_config"], "#": "m2", "max_model_len": "999999"},
           "scheduler_config": {"#": "s2", "max_num_seqs": "333333"}}
    assert cf.key_diff(base, _info(key="k2", hashes={"config": "c2"}, cfg=cfg)) == [
        "config model_config.max_model_len", "config scheduler_config"]  # no field differs: the sub-config
    assert cf.key_diff(base, _info(key="k3", hashes={"code": "k9"})) == ["code"]
    assert cf.key_diff(base, _info(key="k4", hashes={"compiler": "p9"})) == ["compiler"]
    version = {**BASE_CFG, "vllm": {"#": "v2"}}
    assert cf.key_diff(base, _info(key="k5", hashes={"config": "c3"}, cfg=version)) == ["config vLLM version"]


def test_compare_names_the_changed_factor():
    a, b = dev("compiled-warm"), dev("compiled-warm")
    named(a, "torch.compile").attrs.update(_attrs("k0"))
    named(b, "torch.compile").attrs.update(_attrs("k1", hashes={"env": "e2"},
                                                  env={**BASE_ENV, "VLLM_P2P_SIDE_CHANNEL_HOST": "dddddd"}))
    changes = cmp.compare([Start(a.spans, a.source)], [Start(b.spans, b.source)]).start_changes
    line = next(c for c in changes if c.startswith("compile cache key k0 → k1"))
    assert ": env VLLM_P2P_SIDE_CHANNEL_HOST changed; pin: VLLM_P2P_SIDE_CHANNEL_HOST differs" in line
    same = cmp.compare([Start(a.spans, a.source)], [Start(a.spans, a.source)]).start_changes
    assert not [c for c in same if c.startswith("compile cache key")]


