"""Starting the agent's helper threads where Python may refuse one: once the interpreter shuts down (our exit hook
runs there), Python >= 3.12 starts no new thread."""

from __future__ import annotations

import threading


def start(thread: threading.Thread) -> bool:
    """Start ``thread``; False at interpreter shutdown, where the caller does that work itself (or leaves it to the
    exit). Any other failure to start a thread (the process's thread limit) is raised, as before."""
    try:
        thread.start()
    except RuntimeError as exc:
        if "shutdown" not in str(exc):
            raise
        return False
    return True
