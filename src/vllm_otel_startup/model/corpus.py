"""The recorded-start corpus on disk: which files a directory, glob or file names (ours: ``*.jsonl`` and
``*.jsonl.gz``), and their text, plain or gzipped. The one reader behind the command line (cli/sources.py) and
the readiness estimate of a running start (estimate.py)."""

from __future__ import annotations

import glob
import gzip
import os
from collections.abc import Iterable

from vllm_otel_startup.model.errors import ReportError

EXTENSIONS = (".jsonl", ".jsonl.gz")


def files(sources: Iterable[str]) -> list[str]:
    """The files these directories (every ``*.jsonl[.gz]`` below each), globs (matching files; directories
    expanded as a directory is) and files name, sorted by path, each once."""
    found: set[str] = set()
    for src in sources:
        src = os.path.expanduser(src)
        for m in [src] if os.path.isdir(src) else glob.glob(src, recursive=True):
            if os.path.isdir(m):
                found.update(p for ext in EXTENSIONS for p in glob.glob(os.path.join(m, "**", "*" + ext),
                                                                      recursive=True))
            elif os.path.isfile(m):
                found.add(m)
    return sorted(found)


def newest_first(paths: Iterable[str]) -> list[str]:
    """``paths`` by modification time, newest first (a file gone meanwhile last)."""
    def mtime(p: str) -> float:
        try:
            return os.path.getmtime(p)
        except OSError:
            return 0.0
    return sorted(paths, key=mtime, reverse=True)


def read_text(path: str) -> str:
    """The file's text (gunzipped where it ends in ``.gz``); every problem is one ReportError."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a directory") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise ReportError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
