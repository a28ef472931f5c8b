"""The directories the agent writes into: the spool under the shared temporary directory and the local start files.

The rule (docs/configuration.md, "Directories"): every level the agent creates is owner-only (``0700``); an
existing directory must belong to this process's user (effective uid). One owned by another user is refused: on a
shared ``/tmp`` anyone can create ``vllm-otel-startup-spool`` first and then read, replace or block the hand-over.
``tighten``: an existing directory of ours that group or others may open is reset to ``0700`` (the spool root, a
fixed name under ``/tmp`` that earlier versions created ``0755``); a directory the user chose keeps its mode (our
files in it are ``0600``). Standard library only; nothing here raises.
"""

from __future__ import annotations

import contextlib
import os
import stat


def prepare(path: str, *, tighten: bool = False, follow: bool = True) -> str | None:
    """Create ``path`` (owner-only, with any missing parents) unless it exists; None when it may be used, else
    why not, as a short clause for a one-line warning. ``follow=False``: ``path`` itself must not be a symbolic
    link (a link planted under a shared directory)."""
    try:
        _make(path)
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        return f"cannot create it ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is a symbolic link" if stat.S_ISLNK(st.st_mode) else "it is not a directory"
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"it belongs to uid {st.st_uid}, not to this user (uid {uid})"
    if tighten and st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            return f"cannot make it owner-only ({exc.strerror or exc})"
    return None


def _make(path: str) -> None:
    """``os.makedirs`` with ``0700`` for every level it creates (makedirs gives parents the default mode)."""
    path = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile (another process): the caller checks its owner
            os.mkdir(level, 0o700)
