"""The lab stays out of the product and in its own rooms: benchmarks/ (measurements, one entry point:
``python -m benchmarks COMMAND``), tools/ (generators of committed files, ``python -m tools.NAME``), support/ (the
test bench). Each keeps src/'s size rules; nothing finds its imports by editing ``sys.path`` (pytest's
``pythonpath`` and package imports do it); scripts/ holds only the README's demo."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

from benchmarks.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
LAB = ("benchmarks", "tools", "support")
MAX_LINES, MAX_FUNCTION = 450, 80
# editing the interpreter's path in code: insert/append, slice assignment, +=
PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\s*\(|\[[^]]*\]\s*=|\+=)")


def lab_modules() -> list[Path]:
    return sorted(p for top in LAB for p in (ROOT / top).rglob("*.py"))


def test_no_lab_module_is_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in lab_modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert lab_modules() and long == {}, f"over {MAX_LINES} lines: {long}"


def test_no_lab_function_is_over_80_lines():
    long = {}
    for path in lab_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert long == {}, f"functions over {MAX_FUNCTION} lines: {long}"


def test_nothing_in_the_repository_edits_sys_path():
    """Every import is found by the package layout or pytest's ``pythonpath`` (pyproject.toml); a child process that
    needs another folder gets it through its environment (PYTHONPATH). This file holds the pattern only."""
    here = Path(__file__).resolve()
    tracked = [p for ext in ("*.py", "*.sh") for p in ROOT.rglob(ext)
               if ".git" not in p.parts and p.resolve() != here and not any(s.startswith(".venv") for s in p.parts)]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in tracked
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if PATH_EDIT.search(line)]
    assert tracked and found == []


def test_the_pattern_sees_every_form_of_a_path_edit():
    for line in ("sys.path.insert(0, x)", "sys.path.append(x)", "sys.path[:0] = [x]", "sys.path += [x]"):
        assert PATH_EDIT.search(line), line
    assert not PATH_EDIT.search("monkeypatch.syspath_prepend(str(tmp_path))")  # a fixture's, undone after the test


def test_the_lab_packages_are_the_repository_roots():
    """tests/benchmarks (no ``__init__.py``: its tests import by basename) never shadows the package it tests."""
    import benchmarks
    import support
    import tools

    assert [Path(m.__file__).parent for m in (benchmarks, tools, support)] == [ROOT / top for top in LAB]


def test_scripts_holds_only_the_readme_demo():
    assert sorted(p.name for p in (ROOT / "scripts").iterdir()) == ["demo.sh"]


def test_benchmarks_have_one_entry_point_and_every_command_is_a_module_of_it():
    """No benchmark module runs as a script of its own; each command names a module whose ``main`` takes its
    arguments; every module with a ``main`` is a command."""
    own_main = [p.name for p in (ROOT / "benchmarks").rglob("*.py")
                if p.name != "__main__.py" and "__name__ == \"__main__\"" in p.read_text()]
    assert own_main == []
    with_main = {p.stem for p in (ROOT / "benchmarks").glob("*.py")
                 if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)}
    assert with_main - {"__main__"} == {module for module, _ in COMMANDS.values()}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_benchmark_command_answers_help(command, capsys):
    from benchmarks.__main__ import main

    with pytest.raises(SystemExit) as done, contextlib.redirect_stderr(io.StringIO()):
        main([command, "--help"])
    assert done.value.code == 0
    assert f"python -m benchmarks {command}" in capsys.readouterr().out


def test_the_entry_point_lists_its_commands_and_refuses_an_unknown_one(capsys):
    from benchmarks.__main__ import main

    assert main([]) == 2
    listed = capsys.readouterr().out
    assert all(f"  {c} " in listed for c in COMMANDS)
    assert main(["no-such"]) == 2 and "unknown command 'no-such'" in capsys.readouterr().err


def test_nothing_in_src_imports_the_lab():
    lab = {*LAB, "tests", "scripts"}
    bad = []
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in lab]
    assert bad == []
