"""tests/unit mirrors src/ (tests/unit/README.md): every module of the package has its test file at the mirrored
path, so a newcomer finds a module's tests in seconds, and every test file there names a module that exists."""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent
PKG = UNIT.parents[1] / "src" / "vllm_otel_startup"
# folders of tests that span several modules or test the test bench, beside the mirror (README.md)
NOT_MIRRORS = {"behaviour", "testbench"}


def mirrored(module: Path) -> Path | None:
    """The test file of ``module``: ``<path>/<name>.py`` -> ``tests/unit/<path>/test_<name>.py``; a package's
    ``__init__.py`` -> ``test_<package>.py`` in its folder (None where it holds only a docstring)."""
    rel = module.relative_to(PKG)
    if module.name != "__init__.py":
        return UNIT / rel.parent / f"test_{module.stem}.py"
    body = ast.parse(module.read_text()).body
    if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body):
        return None
    return UNIT / rel.parent / f"test_{rel.parent.name or PKG.name}.py"


def test_every_module_has_its_test_file_at_the_mirrored_path():
    modules = sorted(PKG.rglob("*.py"))
    assert len(modules) > 50
    missing = [str(m.relative_to(PKG)) for m in modules if (t := mirrored(m)) is not None and not t.is_file()]
    assert missing == [], f"modules without tests/unit/<path>/test_<module>.py: {missing}"


def test_every_mirrored_test_folder_is_a_folder_of_the_package():
    folders = {p.parent for p in UNIT.rglob("test_*.py")} - {UNIT}
    stray = sorted(str(f.relative_to(UNIT)) for f in folders
                   if f.relative_to(UNIT).parts[0] not in NOT_MIRRORS and not (PKG / f.relative_to(UNIT)).is_dir())
    assert stray == []


def test_every_test_folder_is_a_package_so_same_named_files_import_apart():
    folders = {p.parent for p in UNIT.rglob("test_*.py")} | {UNIT}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").is_file()) == []
