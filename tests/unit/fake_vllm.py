"""Fake vLLM module trees, shaped exactly like a release: every qualname that tests/data/vllm-qualnames-by-release.txt
(tools/qualname_inventory.py: an AST scan of the released wheels) lists as present in that release, in its
module, with vLLM's own ``@instrument(span_name=...)`` where the release has it. vLLM's tracing module is a
stand-in shaped like vLLM's (``instrument`` -> ``instrument_otel`` -> a functools.wraps wrapper that opens a span
through the global tracer provider), at the place the release keeps it: ``vllm.tracing`` up to 0.33, or
``vllm.foundation.observability.tracing`` (vLLM main's layout, with ``vllm.tracing`` left as its sys.modules alias)."""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

QUALNAMES = Path(__file__).resolve().parents[1] / "data" / "vllm-qualnames-by-release.txt"
OLD_TRACING, NEW_TRACING = "vllm.tracing", "vllm.foundation.observability.tracing"

OTEL_PY = '''
import functools
import inspect

from opentelemetry import trace


def instrument_otel(func, span_name, attributes, record_exception):
    final_span_name = span_name or func.__qualname__
    module_name = func.__module__

    @functools.wraps(func)
    async def async_wrapper(*args, **kwargs):
        tracer = trace.get_tracer(module_name)
        with tracer.start_as_current_span(final_span_name, attributes=attributes, record_exception=record_exception):
            return await func(*args, **kwargs)

    @functools.wraps(func)
    def sync_wrapper(*args, **kwargs):
        tracer = trace.get_tracer(module_name)
        with tracer.start_as_current_span(final_span_name, attributes=attributes, record_exception=record_exception):
            return func(*args, **kwargs)

    return async_wrapper if inspect.iscoroutinefunction(func) else sync_wrapper
'''

TRACING_INIT_PY = '''
import functools

from {pkg}.otel import instrument_otel


def instrument(obj=None, *, span_name="", attributes=None, record_exception=True):
    if obj is None:
        return functools.partial(instrument, span_name=span_name, attributes=attributes,
                                 record_exception=record_exception)
    return instrument_otel(obj, span_name, attributes, record_exception)
'''

ALIAS_PY = '''
import importlib
import sys

sys.modules[__name__] = importlib.import_module({new!r})
'''


def inventory() -> dict[str, dict[str, str]]:
    """target -> release -> its cell as the file has it (``L406 instrument(span_name='...')``, ``-``, ``-nomod-``,
    ``imported(...)``), targets and releases in file order."""
    cells: dict[str, dict[str, str]] = {}
    target = None
    for line in QUALNAMES.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            target = line.strip()
            continue
        if target:
            cells[target] = {m.group(1): m.group(2).strip() for m in re.finditer(r"v(\d[^:]*):([^|]+)", line)}
    return cells


def _cells(version: str) -> dict[str, tuple[str, str | None]]:
    """target -> (def line cell, native span name or None) for the targets present in one release."""
    out: dict[str, tuple[str, str | None]] = {}
    for target, by_release in inventory().items():
        m = re.match(r"(L\S*)(?:\s+instrument\(span_name='([^']*)'\))?", by_release.get(version, ""))
        if m:
            out[target] = (m.group(1), m.group(2))
    if not out:
        raise ValueError(f"vLLM {version} is not in {QUALNAMES.name}")
    return out


def _is_tracing(module: str) -> bool:
    return any(module == t or module.startswith(t + ".") for t in (OLD_TRACING, NEW_TRACING))


def tracing_package(version: str) -> str | None:
    """Where the release keeps vLLM's tracing package (the module that defines ``instrument_otel``), if anywhere."""
    cells = _cells(version)
    for pkg in (NEW_TRACING, OLD_TRACING):
        if f"{pkg}.otel:instrument_otel" in cells:
            return pkg
    return None


def release_tree(version: str) -> dict[str, list[tuple[str, str | None]]]:
    """module -> [(qualname, native span name or None)] for one release ("0.10.1", "0.33.0"); vLLM's tracing
    package is left out (its stand-in is written by write_tree)."""
    tree: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for target, (_, span) in _cells(version).items():
        module, qual = target.split(":", 1)
        if not _is_tracing(module):
            tree[module].append((qual, span))
    return tree


def write_tree(root: Path, version: str, drop: set[str] = frozenset(), tracing: str | None = None) -> Path:
    """Write the fake package under ``root``; ``drop`` removes targets (an unknown release); ``tracing`` moves
    vLLM's tracing package (default: where the release has it)."""
    tree = release_tree(version)
    native = any(n for items in tree.values() for _, n in items)
    pkg = tracing or tracing_package(version) or OLD_TRACING
    files: dict[Path, list[str]] = defaultdict(list)
    packages = {m.rsplit(".", i)[0] for m in tree for i in range(1, m.count(".") + 1)} | {pkg}
    for module, items in tree.items():
        base = root.joinpath(*module.split("."))
        path = base / "__init__.py" if module in packages else base.with_suffix(".py")
        lines = files[path]
        lines.append(f"from {pkg} import instrument\n" if native else "")
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
        pkg_dir = root.joinpath(*pkg.split("."))
        files[pkg_dir / "otel.py"].append(OTEL_PY)
        files[pkg_dir / "__init__.py"].append(TRACING_INIT_PY.format(pkg=pkg))
        if pkg != OLD_TRACING:  # vLLM main keeps vllm.tracing as an alias of the new package
            files[root.joinpath(*OLD_TRACING.split(".")) / "__init__.py"].append(ALIAS_PY.format(new=pkg))
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
