"""The overhead benchmark's GPU form: the start queue it writes for ../shared/gpu/driver.py (``python -m benchmarks
overhead gpu-queue``) and the variant arms it takes."""

from __future__ import annotations

import pytest

from benchmarks import overhead_queue, pairs


def test_a_gpu_queue_runs_its_tail_arms_in_turn_so_a_call_cut_short_still_compares_every_arm():
    q = overhead_queue.gpu_queue(1, {}, lanes=2, tail={"a": {"X": "1"}, "b": {"Y": "1"}}, tail_pairs=2)
    arms = [e["arm"] for e in q[1:] if e["arm"] != "plain"]
    assert arms == ["instr", "a", "b", "a", "b"]
    assert all(e["gpu"] in (0, 1) for e in q) and {e["pair"] for e in q[1:]} == {1, 2, 3, 4, 5}
    for arm in ("a", "b"):  # each arm on both GPUs and in both places of its pair (a GPU's bias cannot pile up)
        runs = [e for e in q[1:] if e["arm"] == arm]
        assert {e["gpu"] for e in runs} == {0, 1}
        assert {[x["arm"] for x in q[1:] if x["pair"] == e["pair"]].index(arm) for e in runs} == {0, 1}
    assert next(e for e in q[1:] if e["arm"] == "a")["env"]["X"] == "1"




def test_more_pairs_continue_a_queue_without_a_cold_start_in_the_order_one_long_queue_has():
    """gpu-queue --first-pair 9 --pairs 3: the three pairs a machine that ran pairs 1-8 can still fit (issue 25's
    eleven pairs), numbered on, each pair's order flipped as in one queue of eleven."""
    long = overhead_queue.gpu_queue(11, {})
    more = overhead_queue.gpu_queue(3, {}, first_pair=9)
    assert [e["name"] for e in more] == ["pair9_plain", "pair9_instr", "pair10_instr", "pair10_plain",
                                         "pair11_plain", "pair11_instr"]
    assert more == long[-6:]
    assert overhead_queue.gpu_queue(2, {})[0]["name"] == "cold_otlp"


def test_a_variant_names_its_variables_and_only_an_env_arm_may_add_none():
    """``env…`` arms run without the launcher (OpenTelemetry's sitecustomize on PYTHONPATH): nothing more to name."""
    assert pairs.parse_variants(["nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers,probes", "env="]) == {
        "nowatch": {"OTEL_PYTHON_VLLM_STARTUP_OFF": "watchers,probes"}, "env": {}}
    with pytest.raises(SystemExit):
        pairs.parse_variants(["nowatch="])


def test_an_env_arm_on_the_gpu_runs_without_the_launcher_with_the_sitecustomize_first_on_the_drivers_path():
    q = overhead_queue.gpu_queue(1, {"env": {}, "otelonly": {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}})
    by_arm = {e["arm"]: e for e in q if e.get("arm")}
    env = by_arm["env"]
    assert env["instr"] and env["launcher"] is False and env["export"] == "otlp"
    assert env["env"]["PYTHONPATH"].split(":")[0] == "@R/site-otel/opentelemetry/instrumentation/auto_instrumentation"
    assert env["env"]["OTEL_PYTHON_DISTRO"] == env["env"]["OTEL_PYTHON_CONFIGURATOR"] == "vllm_startup"
    for arm in ("instr", "otelonly", "plain"):  # the others as before: the launcher where instrumented
        assert "launcher" not in by_arm[arm] and "PYTHONPATH" not in by_arm[arm]["env"]
