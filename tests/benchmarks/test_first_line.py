"""The API server's first-line benchmark (``python -m benchmarks first-line``): its arms, environments and table."""

from __future__ import annotations

from pathlib import Path

from benchmarks import first_line, pairs


def test_the_api_server_first_line_bench_reads_its_arms_and_compares_each_with_plain():
    """``python -m benchmarks first-line`` (no GPU: vLLM's CUDA wheel up to the API server's first line): ``plain``
    and any arm named ``plain...`` run without opentelemetry-instrument, every other arm with it; each with its
    environment; the table gives each arm's medians against plain."""
    arms = pairs.parse_arms(["plain", "instr", "nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers;A=1",
                                      "plainsrc=PYTHONDONTWRITEBYTECODE=1"])
    assert arms == {"plain": None, "instr": {}, "nowatch": {"OTEL_PYTHON_VLLM_STARTUP_OFF": "watchers", "A": "1"},
                    "plainsrc": {"PYTHONDONTWRITEBYTECODE": "1"}}
    assert [pairs.instrumented(a) for a in arms] == [False, True, True, False]
    env = first_line._env(Path("/v"), "plainsrc", arms["plainsrc"], "/w")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and "OTEL_PYTHON_VLLM_STARTUP_DIR" not in env
    env = first_line._env(Path("/v"), "nowatch", arms["nowatch"], "/w")
    assert env["OTEL_PYTHON_VLLM_STARTUP_OFF"] == "watchers" and env["OTEL_PYTHON_VLLM_STARTUP_DIR"] == "/w"
    rows = [{"arm": "plain", "user_s": 5.8, "sys_s": 0.8, "faults": 170_100, "vcsw": 90},
            {"arm": "plain", "user_s": 5.9, "sys_s": 0.8, "faults": 170_300, "vcsw": 110},
            {"arm": "instr", "user_s": 6.0, "sys_s": 0.9, "faults": 177_100, "vcsw": 900},
            {"arm": "instr", "chunk_maps": 28_099, "wall_s": 9.0}]
    table = first_line.summary(rows, ["plain", "instr"]).splitlines()
    assert table[1].split()[:8] == ["plain", "2", "6.65", "+0.00", "170200", "+0", "200", "100"]
    assert table[2].split() == ["instr", "1", "6.90", "+0.25", "177100", "+6900", "0", "900", "28099"]


def test_the_child_form_starts_an_interpreter_as_a_spawned_engine_core_of_an_instrumented_server():
    """``first-line child``: every arm's interpreter says it is a spawned EngineCore (multiprocessing's flag on
    its command line, the kind in its environment); only instrumented arms get OpenTelemetry's sitecustomize first on
    PYTHONPATH and our distro named, as a child of ``opentelemetry-instrument`` inherits them."""
    arms = pairs.parse_arms(["plain", "instr", "nowatch=OTEL_PYTHON_VLLM_STARTUP_OFF=watchers"])
    plain = first_line.child_env(Path("/v"), "plain", arms["plain"], "/w", "/site/auto")
    instr = first_line.child_env(Path("/v"), "instr", arms["instr"], "/w", "/site/auto")
    nowatch = first_line.child_env(Path("/v"), "nowatch", arms["nowatch"], "/w", "/site/auto")
    assert plain["OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND"] == instr["OTEL_PYTHON_VLLM_STARTUP_CHILD_KIND"] == "engine_core"
    assert "/site/auto" not in plain.get("PYTHONPATH", "") and "OTEL_PYTHON_DISTRO" not in plain
    assert instr["PYTHONPATH"].split(":")[0] == "/site/auto" and instr["OTEL_PYTHON_DISTRO"] == "vllm_startup"
    assert nowatch["OTEL_PYTHON_VLLM_STARTUP_OFF"] == "watchers" and nowatch["PYTHONPATH"].startswith("/site/auto")
