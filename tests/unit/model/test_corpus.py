"""model/corpus.py: which recorded-start files directories, globs and files name (``*.jsonl`` and
``*.jsonl.gz``, sorted, each once), newest first by modification time, and their text plain or gzipped; every
problem reading one is one ReportError."""

from __future__ import annotations

import gzip
import os

import pytest

from vllm_otel_startup.model import corpus
from vllm_otel_startup.model.errors import ReportError


def test_a_directory_names_every_start_file_below_it_and_nothing_else(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("a.jsonl", "sub/b.jsonl.gz", "notes.txt", "c.json"):
        (tmp_path / name).write_text("{}")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "sub" / "b.jsonl.gz")
    assert corpus.files([str(tmp_path)]) == [a, b]
    assert corpus.files([str(tmp_path / "*.jsonl"), a, str(tmp_path / "notes.txt")]) == [
        a, str(tmp_path / "notes.txt")]  # a file named is taken as it is, once
    assert corpus.files([str(tmp_path / "absent")]) == []


def test_newest_first_by_modification_time_and_a_vanished_file_last(tmp_path):
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(""), new.write_text("")
    os.utime(old, (1_000, 1_000))
    assert corpus.newest_first([str(tmp_path / "gone.jsonl"), str(old), str(new)]) == [
        str(new), str(old), str(tmp_path / "gone.jsonl")]


def test_text_is_read_plain_or_gunzipped(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"a": 1}\n')
    with gzip.open(tmp_path / "z.jsonl.gz", "wt") as f:
        f.write('{"b": 2}\n')
    assert corpus.read_text(str(tmp_path / "p.jsonl")) == '{"a": 1}\n'
    assert corpus.read_text(str(tmp_path / "z.jsonl.gz")) == '{"b": 2}\n'


def test_every_reading_problem_is_one_report_error(tmp_path):
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip")
    for path, words in ((tmp_path / "none.jsonl", "no such file"), (tmp_path, "is a directory"),
                        (tmp_path / "bad.jsonl.gz", "cannot read")):
        with pytest.raises(ReportError, match=words):
            corpus.read_text(str(path))
