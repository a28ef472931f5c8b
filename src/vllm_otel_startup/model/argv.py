"""What of a command line may leave the process, and the model it names: secret-looking flag values and
URL credentials are blanked. Used by the agent (``process.command_args``, model labels) and by the facts of
a recorded start (a start that failed before its config still names its model).

Standard library only and cheap to import: the agent imports it at every interpreter start.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

REDACTED = "<redacted>"


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:  # compiled on first use, not at every start
    return (
        re.compile(r"(api[-_]?key|token|secret|passw(or)?d|credential|auth)", re.I),
        re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@"),
    )


def redact_url(value: str) -> str:
    """Blank the user-info (``user:password@``) of every URL in ``value``."""
    return _patterns()[1].sub(lambda m: m.group("scheme") + REDACTED + "@", value)


def redact_argv(argv: list[str]) -> list[str]:
    """Blank the values of secret-looking flags and the user-info of URLs."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and _patterns()[0].search(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_url(arg))
    return out


def model_from_argv(argv: Any) -> str | None:
    """The model a ``vllm serve`` command line names (``serve MODEL``, ``--model M`` or ``--model=M``),
    credentials redacted; None for anything but a list naming one."""
    if not isinstance(argv, list):
        return None
    args = [str(a) for a in argv]
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            return redact_url(args[i + 1])
        if arg.startswith("--model="):
            return redact_url(arg.split("=", 1)[1])
    if "serve" in args:
        rest = args[args.index("serve") + 1:]
        if rest and not rest[0].startswith("-"):
            return redact_url(rest[0])
    return None
