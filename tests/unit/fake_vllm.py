"""Fake vLLM module trees, shaped exactly like a release: every qualname that
shared/reference/vllm-qualnames-by-release.txt lists as present in that release, in its module, with
vLLM's own ``@instrument(span_name=...)`` where the release has it (a stand-in for vllm/tracing/otel.py
that opens a span through the global tracer provider, as vLLM does)."""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

QUALNAMES = Path(__file__).resolve().parents[1] / "data" / "vllm-qualnames-by-release.txt"

OTEL_PY = '''
import functools
from opentelemetry import trace

def instrument(span_name=""):
    def deco(func):
        @functools.wraps(func)
        def sync_wrapper(*args, **kwargs):
            with trace.get_tracer(func.__module__).start_as_current_span(span_name or func.__qualname__):
                return func(*args, **kwargs)
        return sync_wrapper
    return deco
'''


def release_tree(version: str) -> dict[str, list[tuple[str, str | None]]]:
    """module -> [(qualname, native span name or None)] for one release ("0.10.1", "0.33.0")."""
    tree: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    target = None
    for line in QUALNAMES.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            target = line.strip()
            continue
        for cell in line.split("|"):
            m = re.match(r"\s*v(\S+):(\S+)(?:\s+instrument\(span_name='([^']*)'\))?", cell)
            if m and m.group(1) == version and m.group(2).startswith("L") and target:
                module, qual = target.split(":", 1)
                tree[module].append((qual, m.group(3)))
    return tree


def write_tree(root: Path, version: str, drop: set[str] = frozenset()) -> Path:
    """Write the fake package under ``root``; ``drop`` removes targets (an unknown release)."""
    tree = release_tree(version)
    native = any(n for items in tree.values() for _, n in items)
    files: dict[Path, list[str]] = defaultdict(list)
    packages = {m.rsplit(".", i)[0] for m in tree for i in range(1, m.count(".") + 1)} | {"vllm.tracing"}
    for module, items in tree.items():
        base = root.joinpath(*module.split("."))
        path = base / "__init__.py" if module in packages else base.with_suffix(".py")
        lines = files[path]
        lines.append("from vllm.tracing.otel import instrument\n" if native else "")
        classes: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
        for qual, span in items:
            if f"{module}:{qual}" in drop:
                continue
            if "." in qual:
                cls, meth = qual.split(".", 1)
                classes[cls].append((meth, span))
            else:
                lines.append((f"@instrument(span_name={span!r})\n" if span else "")
                             + f"def {qual}(*args, **kwargs):\n    return {qual!r}\n")
        for cls, meths in classes.items():
            body = "".join(
                (f"    @instrument(span_name={span!r})\n" if span else "")
                + f"    def {meth}(self, *args, **kwargs):\n        return {None if meth == '__init__' else meth!r}\n"
                for meth, span in meths
            )
            lines.append(f"class {cls}:\n{body or '    pass'}\n")
    if native:
        files[root / "vllm" / "tracing" / "otel.py"].append(OTEL_PY)
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines))
    for d in [p for p in root.rglob("*") if p.is_dir()]:
        (d / "__init__.py").touch(exist_ok=True)
    init = root / "vllm" / "__init__.py"
    init.write_text(init.read_text() + f"\n__version__ = {version!r}\n")
    return root


def purge() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]
