"""cli/output.py: a command's warnings are one prefixed line on stderr, scrubbed of secrets; notes go to stderr,
so stdout holds only the result (a JSON document stays parseable)."""

from __future__ import annotations

from vllm_otel_startup.cli import output


def test_a_warning_is_one_prefixed_scrubbed_line_on_stderr(capsys):
    output.warn("cannot reach https://user:hunter2@tempo:3200/api")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("vllm-otel-startup: cannot reach https://") and err.endswith("\n")
    assert "hunter2" not in err and err.count("\n") == 1


def test_a_note_goes_to_stderr_as_it_is(capsys):
    output.to_stderr("waterfall: start.html")
    assert capsys.readouterr() == ("", "waterfall: start.html\n")
