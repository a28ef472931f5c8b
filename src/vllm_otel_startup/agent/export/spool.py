"""The spool: how the EngineCore and workers hand their startup spans to the API server.

At its ready point each child process writes its startup spans (OTLP JSON, as the local file exporter
does) to ``$TMPDIR/vllm-otel-startup-spool/<trace id>/<kind>-<pid>.json``; the API server reads the
directory when it needs the whole start (the /metrics collector, the printed breakdown) and removes it
when it exits. Nothing here raises: a spool that cannot be written only costs the /metrics view of that
process. The root and each start's directory are owner-only; a root that belongs to another user (anyone can
create it first on a shared ``/tmp``) is neither written nor read, with one warning (private_dir.py).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from vllm_otel_startup.agent.export import private_dir
from vllm_otel_startup.model.spanmodel import Span, parse_otlp

_log = logging.getLogger("vllm_otel_startup")
MAX_AGE_S = 24 * 3600  # leftovers of servers that died without cleaning up


def root() -> str:
    return os.path.join(tempfile.gettempdir(), "vllm-otel-startup-spool")


def directory(trace_id: str) -> str:
    return os.path.join(root(), trace_id)


_warned: list[str] = []


def usable_root() -> str | None:
    """The spool root, created owner-only; None (one warning per process) when it belongs to someone else."""
    path = root()
    why = private_dir.prepare(path, tighten=True, follow=False)
    if why is None:
        return path
    if path not in _warned:
        _warned.append(path)
        _log.warning("vllm-otel-startup: not using the spool %s: %s; the EngineCore and worker phases are left out "
                     "of /metrics and the printed breakdown (point TMPDIR at a directory of your own)", path, why)
    return None


_checked: set[str] = set()  # start directories found (or made) owner-only by this process: not checked again


def _own_directory(trace_id: str) -> str | None:
    """The start's directory, owner-only; checked once per process (a child's in-progress state is written every
    few seconds while it starts, and each check is a few syscalls, each a hand-over of the GIL from vLLM's thread)."""
    d = directory(trace_id)
    if d in _checked:
        return d
    base = usable_root()
    if base is None:
        return None
    if private_dir.prepare(d, follow=False) is not None:
        return None
    _checked.add(d)
    return d


def _write(trace_id: str, name: str, text: str) -> bool:
    """Write ``<trace id>/<name>`` owner-only and atomically (readers never see half a file)."""
    for _ in range(2):  # a directory checked earlier and gone since: checked (made) again, once
        cached = directory(trace_id) in _checked
        d = _own_directory(trace_id)
        if d is None:
            return False
        try:
            tmp = os.path.join(d, f".{name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, os.path.join(d, name))
            return True
        except OSError as exc:
            _checked.discard(d)
            if not cached:
                _log.debug("spool write of %s failed: %s", name, exc)
                return False
    return False


def _read(trace_id: str, suffix: str) -> list[tuple[str, Any]]:
    """(name, parsed JSON) of every ``<trace id>/*<suffix>`` file, in name order; unreadable ones skipped."""
    d = _own_directory(trace_id) if os.path.lexists(directory(trace_id)) else None
    if d is None:
        return []
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(suffix))
    except OSError:
        return []
    out: list[tuple[str, Any]] = []
    for n in names:
        try:
            with open(os.path.join(d, n), encoding="utf-8") as f:
                out.append((n, json.load(f)))
        except (OSError, ValueError) as exc:
            _log.debug("spool file %s unreadable: %s", n, exc)
    return out


def process_name(kind: str, pid: int | str) -> str:
    """A process's name in its start's spool (``<kind>-<pid>``; its files add ``.json`` or ``.live``)."""
    return f"{kind}-{pid}"


def write(trace_id: str, name: str, spans: Sequence[Any]) -> bool:
    """Write this process's ended SDK spans."""
    from vllm_otel_startup.model.spanmodel import encode

    return _write(trace_id, f"{name}.json", json.dumps(encode(spans), separators=(",", ":")))


def read(trace_id: str, skip: str | None = None) -> list[Span]:
    """Every span the processes of this start have spooled so far (``skip``: the reader's own file)."""
    out: list[Span] = []
    for n, doc in _read(trace_id, ".json"):
        if skip is not None and n == f"{skip}.json":
            continue
        try:
            out.extend(parse_otlp(doc))
        except (ValueError, KeyError, TypeError) as exc:
            _log.debug("spool file %s unreadable: %s", n, exc)
    return out


def count(trace_id: str, prefix: str) -> int:
    """How many processes whose spool name starts with ``prefix`` have spooled their spans (no file is read)."""
    try:
        return sum(n.startswith(prefix) and n.endswith(".json") for n in os.listdir(directory(trace_id)))
    except OSError:
        return 0


def remove(trace_id: str) -> None:
    if os.path.lexists(directory(trace_id)) and _own_directory(trace_id) is not None:
        shutil.rmtree(directory(trace_id), ignore_errors=True)
    _checked.discard(directory(trace_id))


def prune(now: float | None = None) -> None:
    """Remove spool directories older than a day (servers killed before they could clean up)."""
    now = now or time.time()
    base = usable_root()
    try:
        entries = os.listdir(base) if base is not None else []
    except OSError:
        return
    for e in entries:
        path = os.path.join(base, e)
        try:
            if now - os.path.getmtime(path) > MAX_AGE_S:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


# ---- a child's in-progress state (agent/live/progress.py): <trace id>/<kind>-<pid>.live, rewritten on each tick ----
def write_live(trace_id: str, name: str, text: str) -> bool:
    return _write(trace_id, name, text)


def read_live(trace_id: str) -> list[dict[str, Any]]:
    """The children's in-progress states (the ones still starting: a child removes its file at its ready point)."""
    return [doc for _, doc in _read(trace_id, ".live")]


def remove_live(trace_id: str, name: str) -> None:
    path = os.path.join(directory(trace_id), name)
    try:
        if os.path.lexists(path):
            os.unlink(path)
    except OSError:
        pass
