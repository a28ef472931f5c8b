"""``compare A B --fail-if-slower PCT [--phase ID]``: the startup-time gate, on the corpus's cold and warm starts
of one model (tests/data/starts/corpus: the compiled l4-h256 model, a fresh cache root, then the same root again)."""

from __future__ import annotations

import pytest
from recorded import DATA

from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.cli import sources

COLD = str(DATA / "corpus" / "l4-h256-compiled-cold.jsonl.gz")
WARM = str(DATA / "corpus" / "l4-h256-compiled-warm.jsonl.gz")


def _gate(capsys, *argv: str) -> tuple[int, list[str]]:
    status = cli.main(["compare", *argv])
    captured = capsys.readouterr()
    return status, captured.err.splitlines()


def test_cold_after_warm_is_slower_one_line_and_exit_1(capsys):
    total = {p: sources.one(p).root.duration for p in (COLD, WARM)}
    status, err = _gate(capsys, WARM, COLD, "--fail-if-slower", "10")
    pct = 100 * (total[COLD] - total[WARM]) / total[WARM]
    assert status == 1 and len(err) == 1
    assert err[0].startswith("vllm-otel-startup: slower: vLLM startup [API server] ")
    assert f"({pct:+.1f}%), over the 10% limit" in err[0]


def test_warm_after_cold_passes_and_a_limit_above_the_change_passes(capsys):
    assert _gate(capsys, COLD, WARM, "--fail-if-slower", "0")[0] == 0  # faster: within any limit
    total = {p: sources.one(p).root.duration for p in (COLD, WARM)}
    pct = 100 * (total[COLD] - total[WARM]) / total[WARM]
    status, err = _gate(capsys, WARM, COLD, "--fail-if-slower", f"{pct + 1:.1f}")
    assert status == 0 and err[0].startswith(f"vllm-otel-startup: within {pct + 1:.1f}%: vLLM startup")


def test_one_phase_gates_that_phase_in_each_process_kind(capsys):
    status, err = _gate(capsys, WARM, COLD, "--fail-if-slower", "50", "--phase", "torch_compile")
    assert status == 1 and len(err) == 1 and "slower: torch.compile [worker] " in err[0]
    # imports are no slower on a cold cache root: the same gate on them passes, naming the worst process kind
    status, err = _gate(capsys, WARM, COLD, "--fail-if-slower", "50", "--phase", "imports")
    assert status == 0 and err[0].startswith("vllm-otel-startup: within 50%: Imports [")


@pytest.mark.parametrize(("pct", "why"), [("ten", "'ten' is not a number"), ("-5", "must be a number >= 0"),
                                          ("nan", "must be a number >= 0")])
def test_a_bad_percentage_exits_2_with_its_reason(capsys, pct, why):
    with pytest.raises(SystemExit) as exc:
        cli.main(["compare", WARM, COLD, "--fail-if-slower", pct])
    assert exc.value.code == 2 and why in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "why"), [
    (["--fail-if-slower", "10", "--phase", "weights_loading"], "--phase weights_loading: not a phase id"),
    (["--fail-if-slower", "10", "--phase", "cudagraph_capture"], "--phase cudagraph_capture: neither A nor B"),
    (["--phase", "imports"], "--phase gates one phase: it needs --fail-if-slower PCT"),
])
def test_bad_phase_input_exits_2_with_one_line(capsys, argv, why):
    status, err = _gate(capsys, WARM, COLD, *argv)
    assert status == 2 and err == [f"vllm-otel-startup: {why}" + err[0].split(why, 1)[1]]


def test_without_the_flag_compare_exits_0_on_a_slower_start(capsys):
    assert _gate(capsys, WARM, COLD) == (0, [])
