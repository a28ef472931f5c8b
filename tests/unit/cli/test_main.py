"""The command line as a user runs it (a real subprocess): outputs, exit codes, and every bad input named in
the issue as one ``vllm-otel-startup: ...`` line on stderr with exit 2, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from recorded import DATA, dev_path

SRC = str(Path(__file__).resolve().parents[3] / "src")


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    e.pop("OTEL_PYTHON_VLLM_STARTUP_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "vllm_otel_startup.cli", *args], capture_output=True, text=True,
                          env=e, timeout=120)


def one_line_error(p: subprocess.CompletedProcess, contains: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-otel-startup: ") and contains in lines[0], p.stderr


def test_report_prints_tree_causes_advice_and_writes_pictures(tmp_path):
    p = run("report", dev_path("compiled-cold"), "--html", str(tmp_path / "w.html"), "--png", str(tmp_path / "w.png"))
    assert p.returncode == 0, p.stderr
    assert "torch.compile  [worker]  (compile cache miss (15 C++ builds))" in p.stdout
    assert "advice (1):" in p.stdout and "fresh_cache_root" in p.stdout
    assert (tmp_path / "w.html").stat().st_size > 10_000 and (tmp_path / "w.png").read_bytes()[:4] == b"\x89PNG"


def test_report_defaults_to_the_latest_local_start(tmp_path):
    shutil.copy(dev_path("eager-warm"), tmp_path / "a.jsonl.gz")
    p = run("report", env={"OTEL_PYTHON_VLLM_STARTUP_DIR": str(tmp_path)})
    assert p.returncode == 0 and "outcome=ready" in p.stdout
    assert run("report", dev_path("bad-model")).returncode == 1  # a failed start reports, exit 1


def test_compare_and_advise():
    p = run("compare", dev_path("compiled-cold"), dev_path("compiled-warm"))
    assert p.returncode == 0 and "torch.compile [worker]: compile cache miss → hit" in p.stdout
    p = run("advise", dev_path("eager-cold"))
    assert p.returncode == 0 and "1 advice" in p.stdout and "VLLM_CACHE_ROOT" in p.stdout
    assert "0 advice" in run("advise", dev_path("eager-warm")).stdout


@pytest.mark.parametrize("case", ["missing", "empty", "corrupt", "truncated", "not-vllm", "directory-empty",
                                  "unknown-id", "tempo-down", "different-models", "glob-nothing", "bad-model-file"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "corrupt.jsonl").write_text("\x00\x01garbage{\n")
    (tmp_path / "trunc.jsonl").write_text('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":')
    (tmp_path / "other.json").write_text('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "ab" * 16 +
                                          '","spanId":"' + "cd" * 8 + '","name":"GET /","startTimeUnixNano":"1",'
                                          '"endTimeUnixNano":"2"}]}]}]}')
    (tmp_path / "d").mkdir()
    (tmp_path / "model.json").write_text("{}")
    args, contains = {
        "missing": (["report", str(tmp_path / "nope.jsonl")], "no such file"),
        "empty": (["report", str(tmp_path / "empty.jsonl")], "no spans (empty file)"),
        "corrupt": (["report", str(tmp_path / "corrupt.jsonl")], "not OTLP JSON"),
        "truncated": (["compare", str(tmp_path / "trunc.jsonl"), dev_path("eager-warm")], "not OTLP JSON"),
        "not-vllm": (["report", str(tmp_path / "other.json")], "not a vLLM start"),
        "directory-empty": (["report", str(tmp_path / "d")], "no recorded start"),
        "unknown-id": (["report", "ef" * 16], "not in"),
        "tempo-down": (["report", "ef" * 16, "--tempo", "http://127.0.0.1:9"], "cannot reach Tempo"),
        "different-models": (["compare", dev_path("eager-cold"),
                              str(DATA / "corpus" / "l8-h256-eager-warm.jsonl.gz")], "different models"),
        "glob-nothing": (["compare", str(tmp_path / "x*"), dev_path("eager-warm")], "no recorded start"),
        "bad-model-file": (["predict", dev_path("eager-warm"), "--model", str(tmp_path / "model.json")],
                           "not a saved predictor"),
    }[case]
    one_line_error(run(*args, env={"OTEL_PYTHON_VLLM_STARTUP_DIR": str(tmp_path / "d")}), contains)


def test_png_without_pillow_is_one_line(tmp_path):
    blocker = tmp_path / "nopil"
    (blocker / "PIL").mkdir(parents=True)
    (blocker / "PIL" / "__init__.py").write_text("raise ImportError('no Pillow here')\n")
    p = run("report", dev_path("eager-warm"), "--png", str(tmp_path / "x.png"),
            env={"PYTHONPATH": os.pathsep.join([str(blocker), SRC])})
    one_line_error(p, "PNG output needs Pillow: pip install 'vllm-otel-startup[report]'")


def test_a_failing_advice_rule_is_an_error_line_not_silence(monkeypatch, capsys):
    """In the command line there is no host to protect: a rule that raises is named on stderr, exit 1 (it used
    to read as '0 advice'); the other rules still advise."""
    from vllm_otel_startup.cli.main import main
    from vllm_otel_startup.model import advice

    def broken(f, spans):
        raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'float'")

    monkeypatch.setattr(advice, "RULES", [advice.Rule("broken_rule", "never", broken), *advice.RULES])
    assert main(["advise", dev_path("eager-cold")]) == 1
    out, err = capsys.readouterr()
    assert "1 advice" in out and "VLLM_CACHE_ROOT" in out  # fresh_cache_root still fires
    assert err.splitlines() == ["vllm-otel-startup: error: advice rule broken_rule failed on this start (TypeError: "
                                "unsupported operand type(s) for -: 'NoneType' and 'float'); its advice is missing"]
    assert main(["report", dev_path("eager-cold")]) == 1
    out, err = capsys.readouterr()
    assert "advice (1):" in out and "advice rule broken_rule failed" in err
    monkeypatch.setattr(advice, "RULES", advice.RULES[1:])
    assert main(["advise", dev_path("eager-cold")]) == 0 and capsys.readouterr().err == ""


def test_a_first_run_says_how_to_record_a_start(tmp_path):
    p = run("report", env={"OTEL_PYTHON_VLLM_STARTUP_DIR": str(tmp_path / "starts")})
    one_line_error(p, f"no recorded start in {tmp_path / 'starts'}; record one with "
                      "`opentelemetry-instrument vllm serve MODEL`")
    assert f"written to {tmp_path / 'starts'}" in p.stderr


def test_version():
    from vllm_otel_startup import __version__

    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"vllm-otel-startup {__version__}", (p.stdout, p.stderr)
