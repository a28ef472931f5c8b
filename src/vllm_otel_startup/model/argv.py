"""The model a command line names, and the model's name as a metric label (what of a command line may leave
the process: ``redact.py``).

Standard library only and cheap to import: the agent imports it at every interpreter start.
"""

from __future__ import annotations

from typing import Any

from vllm_otel_startup.model.redact import scrub


def model_from_argv(argv: Any) -> str | None:
    """The model a ``vllm serve`` command line names (``serve MODEL``, ``--model M`` or ``--model=M``),
    scrubbed; None for anything but a list naming one."""
    if not isinstance(argv, list):
        return None
    args = [str(a) for a in argv]
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            return scrub(args[i + 1])
        if arg.startswith("--model="):
            return scrub(arg.split("=", 1)[1])
    if "serve" in args:
        rest = args[args.index("serve") + 1:]
        if rest and not rest[0].startswith("-"):
            return scrub(rest[0])
    return None


def model_name(model: Any) -> str:
    """The model's name for a metric label: a hub id (``org/name``) as it is, else the last component of the
    path or URL (``/data/models/llama-3-8b/`` -> ``llama-3-8b``, ``s3://bucket/m/llama?sig=…`` -> ``llama``);
    never a full local path, a URL, its query or its credentials."""
    if model is None:
        return ""
    text = str(model).strip()
    _, sep, rest = text.partition("://")
    if not sep:
        rest = text
    rest = rest.split("?", 1)[0].split("#", 1)[0].replace("\\", "/")
    if sep:  # drop the authority (user-info, host): the model is named by the path
        rest = rest.partition("/")[2] or rest.rpartition("@")[2]
    parts = [p for p in rest.split("/") if p]
    if not parts:
        return scrub(rest.rpartition("@")[2]) if rest else ""
    hub_id = not sep and len(parts) == 2 and not text.startswith(("/", ".", "~")) and "@" not in text
    return scrub("/".join(parts) if hub_id else parts[-1])
