"""Starting the agent's helper threads where Python may refuse one: once the interpreter shuts down (our exit hook
runs there), Python >= 3.12 starts no new thread."""

from __future__ import annotations

import sys
import threading
from typing import Any


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


OS_PREFIX = "vos-"  # our threads as the OS shows them (/proc/<pid>/task/<tid>/comm, top -H, py-spy): vos-sampler ...


def os_name(name: str) -> None:
    """Give the calling thread of ours its name at the OS level, where /proc, ``top -H`` and profilers read it and a
    benchmark can tell our threads' CPU from vLLM's: ``vos-`` and what follows ``vllm-otel-startup-`` in its Python
    name, cut to the kernel's 15 bytes (Python < 3.14 gives the OS no thread name). Best effort: Linux only."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write((OS_PREFIX + name.removeprefix("vllm-otel-startup-"))[:15])
    except OSError:
        pass


class Thread(threading.Thread):
    """A thread of ours: named at the OS level as it runs (os_name)."""

    def run(self) -> None:
        os_name(self.name)
        super().run()


def say(text: str, stream: Any = None) -> None:
    """Print ``text`` as whole lines in one write: from a thread of ours, ``print`` writes the text and its newline
    apart, and the host's own line (a program's output, vLLM's log) can land between them, glued to our last line."""
    stream = stream if stream is not None else sys.stdout
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):  # closed or gone: our lines are never worth an error of the host's
        pass
