"""The readiness estimate from recorded starts (model/estimate.py): the last start of the same model and
configuration, walked phase by phase from where this one is now; no matching history means no number."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import estimate

DATA = Path(__file__).resolve().parents[2] / "data" / "starts"


def _dev_history() -> list[estimate.Recorded]:
    return estimate.load([str(DATA / "dev")])


def _at(kind: str, stack: list[tuple[str, str, float]], occurrence: int = 0) -> dict:
    now = time.time_ns()
    return {"process_kind": kind, "stack": [
        {"phase": ph, "name": name, "start_ns": now - int(el * 1e9), "elapsed_s": el, "waiting": False,
         "occurrence": occurrence if i == len(stack) - 1 else 0} for i, (ph, name, el) in enumerate(stack)]}


def test_estimate_from_the_last_matching_start_walks_the_timeline():
    history = _dev_history()
    facts = {sc.MODEL: "/work/recorded/tiny-model", sc.MODE: "cold", sc.ENFORCE_EAGER: False}
    [match] = estimate.matching(history, facts)
    assert match.attrs[sc.ENFORCE_EAGER] is False and match.attrs[sc.MODE] == "cold"
    (c0, c1), = match.phases[("worker", "torch_compile")]
    procs = [_at("api_server", [("startup", "vLLM startup", 50.0), ("engine_wait", "Engine handshake", 30.0)]),
             _at("worker", [("worker_process", "Worker process", 25.0), ("torch_compile", "torch.compile", 10.0)])]
    procs[0]["stack"][1]["waiting"] = True
    est = estimate.estimate([match], procs)
    assert est is not None and (est.kind, est.phase) == ("worker", "torch_compile")
    usual = (c1 - c0) / 1e9
    assert est.usual == pytest.approx(usual)
    assert est.remaining == pytest.approx(usual - 10.0 + (match.end - c1) / 1e9)
    line = estimate.progress_line(procs, est, 50.0, 1)
    assert line.startswith(f"vllm-otel-startup: starting: torch.compile 10 s of ~{usual:.0f} s, ready in ~")
    # past its usual time: the phase counts as ending now, the rest takes its usual time
    late = _at("worker", [("worker_process", "Worker process", 120.0), ("torch_compile", "torch.compile", 99.0)])
    assert estimate.estimate([match], [late]).remaining == pytest.approx((match.end - c1) / 1e9)


def test_no_matching_history_means_no_number():
    history = _dev_history()
    assert estimate.matching(history, {sc.MODEL: "other-model", sc.MODE: "cold"}) == []
    assert estimate.matching(history, {sc.MODEL: "/work/recorded/tiny-model", sc.MODE: "cold",
                                       sc.MAX_MODEL_LEN: 4096}) == []  # another configuration
    assert estimate.estimate([], [_at("worker", [("torch_compile", "torch.compile", 1.0)])]) is None
    line = estimate.progress_line([_at("worker", [("torch_compile", "torch.compile", 1.0)])], None, 5.0, 0)
    assert "no recorded start of this model and configuration: no estimate" in line and "ready in" not in line


def test_a_phase_the_history_never_ran_falls_back_to_the_enclosing_one():
    history = _dev_history()
    [match] = estimate.matching(history, {sc.MODEL: "tiny-model", sc.MODE: "warm", sc.ENFORCE_EAGER: True})
    # an eager start never compiles: torch.compile is unknown there, its enclosing KV-cache profiling is not
    procs = [_at("worker", [("worker_process", "Worker process", 20.0), ("kv_cache_profile", "KV cache profiling", 2.0),
                            ("torch_compile", "torch.compile", 1.0)])]
    est = estimate.estimate([match], procs)
    assert est is not None and est.phase == "kv_cache_profile"


def test_config_key_ignores_host_and_port_only():
    a = estimate.config_key(["/v/bin/vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000", "--dtype", "f32"])
    b = estimate.config_key(["vllm", "serve", "m", "--port=9000", "--dtype", "f32"])
    assert a == b == ("serve", "m", "--dtype", "f32")
    assert estimate.config_key(["vllm", "serve", "m", "--dtype", "f16"]) != a
