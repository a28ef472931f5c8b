"""The model and cli wings import one way: ``model`` only the standard library, ``semconv`` and ``settings``;
``cli`` also ``model`` but never ``agent``; and no import cycle inside either wing (function-level imports
count too)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "vllm_otel_startup"
SHARED = {"vllm_otel_startup", "vllm_otel_startup.semconv", "vllm_otel_startup.settings"}


def _imports(wing: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((PKG / wing).glob("*.py")):
        name = f"vllm_otel_startup.{wing}.{path.stem}".removesuffix(".__init__")
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}  # "from pkg import module"
        out[name] = found
    return out


def _own(found: set[str], modules: dict[str, set[str]]) -> set[str]:
    return {m for m in found if m in modules}


def test_model_imports_only_the_standard_library_semconv_and_settings():
    for name, found in _imports("model").items():
        for m in found:
            top = m.split(".")[0]
            ok = top in sys.stdlib_module_names or top == "__future__" or m in SHARED or m.startswith(
                ("vllm_otel_startup.model", "vllm_otel_startup.semconv.", "vllm_otel_startup.settings."))
            assert ok, f"{name} imports {m}"


def test_cli_never_imports_the_agent():
    for name, found in _imports("cli").items():
        assert not [m for m in found if m.startswith("vllm_otel_startup.agent")], name


def test_no_import_cycle_in_model_or_cli():
    modules = {**_imports("model"), **_imports("cli")}
    graph = {name: _own(found, modules) - {name} for name, found in modules.items()}
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in graph[n]:
            assert state.get(m) != 1, "import cycle: " + " -> ".join([*path, n, m])
            if m not in state:
                visit(m, [*path, n])
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n, [])
