"""The layout's rules, checked on the source: three wings with one-way imports, and no import cycle.

- ``model`` (the offline model of a recorded start) imports only the standard library and the two stdlib-only
  top-level modules ``semconv`` and ``settings``: the agent prints it at ready, the command line reads it;
- ``agent`` (runs inside vLLM processes) never imports ``cli``; ``cli`` never imports ``agent``;
- nothing in ``src`` imports the tests, the scripts or ``support``;
- no import cycle in ``src`` or ``dashboards``, counting every arrow: function-level imports (a lazy import is
  still an arrow) and ``if TYPE_CHECKING:`` imports (a type-only arrow is still a dependency: a module that needs
  another's type takes a small Protocol of its own instead, as ready.ReadyHost and live.LiveHost do);
- ``dashboards`` imports no ``agent`` or ``cli`` module (the vocabulary it needs is in ``semconv``);
- no module over 450 lines, no function over 80, and no ``noqa: SLF001`` (a module reaching into another's private
  state);
- the agent in layers, type-only imports counted: ``foundation`` (imports no other part of the agent) <- the features
  (``resources``, ``causes``, ``patching``, ``export``, ``live``; ``bootstrap`` beside them: what runs at interpreter
  start) <- ``runtime`` <- ``assembly``. No part imports a higher layer; a feature imports another feature only
  along the arrows of FEATURE_ARROWS, each justified there (none goes both ways). A part that needs a higher one's
  object takes a small Protocol of its own (causes.base.ProbeHost, patching.host.PatchHost,
  export.processor.SpanHost, export.ready.ReadyHost, live.progress.LiveHost, export.frontends.LauncherHost).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
PKG = "vllm_otel_startup"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
TOP_STDLIB_ONLY = {f"{PKG}.semconv", f"{PKG}.settings", f"{PKG}.phase_groups"}
MAX_LINES = 450
MAX_FUNCTION_LINES = 80
AGENT = f"{PKG}.agent"
# the agent's layers, lowest first: a part imports its own modules and those of lower layers
LAYERS = {"foundation": 0, "resources": 1, "causes": 1, "patching": 1, "export": 1, "live": 1, "bootstrap": 1,
          "runtime": 2, "assembly": 3}
FEATURES = {part for part, layer in LAYERS.items() if layer == 1}
# the only arrows between features: each reads what a lower feature produced, and none goes back
FEATURE_ARROWS = {
    ("export", "resources"): "the startup metrics report the sampler's series (export/otel_metrics.py)",
    ("live", "export"): "the start in progress reads its children's spooled progress (live/progress.py: spool.py)",
}


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, base: Path, type_only: bool = True) -> Iterator[str]:
    """Every module this file imports, absolute (relative imports resolved), at any depth of the file;
    ``type_only=False`` leaves out the ``if TYPE_CHECKING:`` ones (they never run)."""
    me = module_name(path, base)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    checking = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if not type_only and id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod
            for a in node.names:  # `from pkg import module` names a module too
                yield f"{mod}.{a.name}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def sources(base: Path, top: str) -> list[Path]:
    return sorted((base / top).rglob("*.py"))


def graph(base: Path, top: str) -> dict[str, set[str]]:
    files = sources(base, top)
    known = {module_name(p, base) for p in files}
    return {module_name(p, base): {m for m in imports(p, base) if m in known and m != module_name(p, base)}
            for p in files}


def wing_files(wing: str) -> list[Path]:
    return sorted((SRC / PKG / wing).rglob("*.py"))


@pytest.mark.parametrize("path", wing_files("model"), ids=lambda p: p.name)
def test_the_model_imports_only_the_standard_library(path):
    bad = sorted({m for m in imports(path, SRC)
                  if m.split(".")[0] not in STDLIB and not m.startswith(f"{PKG}.model")
                  and m not in TOP_STDLIB_ONLY and m != PKG})
    assert bad == [], f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", [SRC / PKG / "semconv.py", SRC / PKG / "settings.py", SRC / PKG / "phase_groups.py"],
                         ids=lambda p: p.name)
def test_the_shared_vocabulary_and_settings_are_standard_library_only(path):
    bad = sorted({m for m in imports(path, SRC) if m.split(".")[0] not in STDLIB and m not in TOP_STDLIB_ONLY
                  and m != PKG})
    assert bad == [], f"{path.name} imports {bad}"


@pytest.mark.parametrize("wing, never", [("agent", "cli"), ("cli", "agent")])
def test_the_agent_and_the_command_line_do_not_import_each_other(wing, never):
    for path in wing_files(wing):
        bad = sorted({m for m in imports(path, SRC) if m.startswith(f"{PKG}.{never}")})
        assert bad == [], f"{wing}/{path.name} imports {bad}"


def test_the_dashboards_import_no_agent_or_command_line_module():
    for path in sources(ROOT, "dashboards"):
        bad = sorted({m for m in imports(path, ROOT) if m.startswith((f"{PKG}.agent", f"{PKG}.cli"))})
        assert bad == [], f"dashboards/{path.name} imports {bad}"


@pytest.mark.parametrize("top", [SRC / PKG, ROOT / "dashboards"], ids=["src", "dashboards"])
def test_no_module_is_over_450_lines_or_reaches_into_anothers_private_state(top):
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in top.rglob("*.py")}
    long = {path: n for path, n in lines.items() if n > MAX_LINES}
    assert long == {}, f"over {MAX_LINES} lines: {long}"
    reaching = [str(p.relative_to(ROOT)) for p in top.rglob("*.py") if "noqa: SLF001" in p.read_text()]
    assert reaching == []


def test_nothing_in_src_imports_tests_scripts_or_support():
    for path in sources(SRC, PKG):
        bad = sorted({m for m in imports(path, SRC) if m.split(".")[0] in ("tests", "scripts", "support", "harness")})
        assert bad == [], f"{path} imports {bad}"


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("base, top", [(SRC, PKG), (ROOT, "dashboards")], ids=["src", "dashboards"])
def test_no_import_cycle(base, top):
    g = graph(base, top)
    # a package's __init__ importing its own submodules is not a cycle of behaviour: leave those arrows out
    for mod in g:
        g[mod] = {m for m in g[mod] if not m.startswith(mod + ".")}
    assert _cycles(g) == []


def test_the_rules_see_real_arrows():
    """The checker itself: the report imports the model, the ledger too, the runtime the probes; a planted cycle is
    found."""
    g = graph(SRC, PKG)
    assert any(m.startswith(f"{PKG}.model") for m in g[f"{PKG}.cli.report"])
    assert any(m.startswith(f"{PKG}.model") for m in g[f"{PKG}.agent.foundation.ledger"])
    assert f"{AGENT}.causes" in g[f"{AGENT}.runtime"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]



def test_a_type_only_import_is_an_arrow(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg import a\n")
    assert _cycles(graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]
    assert "pkg.b" not in set(imports(tmp_path / "pkg" / "a.py", tmp_path, type_only=False))


def test_test_file_basenames_are_unique_outside_packages():
    """pytest's default import mode imports a test module outside a package by its basename: two such files of one
    name in different directories stop the whole collection. tests/unit is a package (its files import as
    ``unit.agent.export.test_processor``), so only the other tiers' names must be unique among themselves."""
    from collections import Counter
    from pathlib import Path

    loose = [p for p in (Path(__file__).resolve().parents[3]).rglob("test_*.py")
             if not (p.parent / "__init__.py").exists()]
    assert loose, "no test module outside tests/unit was found"
    names = Counter(p.name for p in loose)
    assert [n for n, c in names.items() if c > 1] == []


def test_every_e2e_test_module_is_marked_e2e():
    """An unmarked module under tests/e2e runs real starts in the fast lane (``-m "not e2e"``), outside the flock."""
    unmarked = [p.name for p in (ROOT / "tests" / "e2e").glob("test_*.py")
                if "pytestmark = pytest.mark.e2e" not in p.read_text()]
    assert unmarked == []


def test_every_wrapper_of_ours_is_made_in_one_place():
    """Only ``agent/foundation/wrapping.py`` makes wrapt wrappers: those pickle and copy as the function they wrap (a
    plain wrapt proxy reaching multiprocessing's pickler killed ``vllm serve --api-server-count 2``)."""
    makers = ("wrap_function_wrapper", "FunctionWrapper(", "wrap_object(", "ObjectProxy", "function_wrapper(",
              "patch_function_wrapper", "transient_function_wrapper")
    found = [f"{p.relative_to(SRC)}: {m}" for p in (SRC / PKG).rglob("*.py") if p.name != "wrapping.py"
             for m in makers if m in p.read_text()]
    assert found == []


def _agent_part(module: str) -> str | None:
    """The layer part of an agent module: its sub-package, or the top-level module itself (runtime, assembly)."""
    if not module.startswith(AGENT + "."):
        return None
    return module[len(AGENT) + 1:].split(".")[0]


def test_every_part_of_the_agent_has_a_layer():
    parts = {_agent_part(module_name(p, SRC)) for p in wing_files("agent")} - {None}
    assert parts == set(LAYERS), "a new part of agent/ needs its place in LAYERS"


def _against_the_layers(path: Path, base: Path) -> list[str]:
    """The imports of an agent module (type-only ones counted) that go up a layer or sideways between features."""
    mine = _agent_part(module_name(path, base))
    bad = set()
    for m in imports(path, base) if mine is not None else ():  # (agent/__init__.py is no part)
        theirs = _agent_part(m)
        if theirs is None or theirs == mine:
            continue
        if theirs not in LAYERS or LAYERS[theirs] > LAYERS[mine]:
            bad.add(f"{m} (up)")
        elif LAYERS[theirs] == LAYERS[mine] and (mine, theirs) not in FEATURE_ARROWS:
            bad.add(f"{m} (sideways)")
    return sorted(bad)


@pytest.mark.parametrize("path", wing_files("agent"), ids=lambda p: str(p.relative_to(SRC / PKG / "agent")))
def test_the_agent_imports_only_downward(path):
    assert _against_the_layers(path, SRC) == []


def test_the_feature_arrows_are_one_way_between_features():
    for a, b in FEATURE_ARROWS:
        assert a in FEATURES and b in FEATURES and (b, a) not in FEATURE_ARROWS


def test_the_layer_rule_sees_an_upward_and_a_sideways_type_only_import(tmp_path):
    agent = tmp_path / PKG / "agent"
    for part in ("foundation", "causes", "patching"):
        (agent / part).mkdir(parents=True)
    (agent / "foundation" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vllm_otel_startup.agent.runtime import R\n")
    (agent / "patching" / "b.py").write_text("def f():\n    from vllm_otel_startup.agent.causes import base\n")
    (agent / "causes" / "c.py").write_text("from vllm_otel_startup.agent.foundation import a\n")
    assert _against_the_layers(agent / "foundation" / "a.py", tmp_path) == [f"{AGENT}.runtime (up)",
                                                                           f"{AGENT}.runtime.R (up)"]
    assert f"{AGENT}.causes (sideways)" in _against_the_layers(agent / "patching" / "b.py", tmp_path)
    assert _against_the_layers(agent / "causes" / "c.py", tmp_path) == []


def test_no_function_is_over_80_lines():
    long = set()
    for path in (SRC / PKG).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES):
                long.add(f"{path.relative_to(SRC / PKG)}:{node.name}")
    assert sorted(long) == [], f"over {MAX_FUNCTION_LINES} lines"


def test_the_runtime_is_at_most_200_lines():
    """The one class a newcomer reads first: its parts live in the packages below it."""
    assert len((SRC / PKG / "agent" / "runtime.py").read_text().splitlines()) <= 200


def test_the_contributing_layout_names_every_module_under_its_folder():
    """CONTRIBUTING.md's "Layout" section is true to the tree: a newcomer finds every module of src/ named under its
    folder's heading (``### `agent/patching/` ``; the package's own modules under ``### `src/vllm_otel_startup/` ``)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    layout = text[text.index("\n## Layout\n"):]
    layout = layout[:layout.index("\n## ", 1)] if "\n## " in layout[1:] else layout
    headed = [part.split("\n", 1) for part in layout.split("\n### ")[1:]]
    sections = {head.strip().strip("`"): body for head, body in headed}
    modules = [p for p in (SRC / PKG).rglob("*.py") if p.name != "__init__.py"]
    assert modules and f"src/{PKG}/" in sections
    missing = []
    for p in modules:
        folder = str(p.parent.relative_to(SRC / PKG)) + "/" if p.parent != SRC / PKG else f"src/{PKG}/"
        if f"- `{p.name}`" not in sections.get(folder, ""):
            missing.append(str(p.relative_to(SRC / PKG)))
    assert missing == [], f"CONTRIBUTING.md's Layout does not name {sorted(missing)} under their folder's heading"
    named = {(folder, name) for folder, body in sections.items() if folder.endswith("/")
             for name in re.findall(r"^- `([\w.]+\.py)`", body, re.M)}
    stale = sorted(f"{folder}{name}" for folder, name in named
                   if not (SRC / PKG / folder.removeprefix(f"src/{PKG}/") / name).is_file())
    assert stale == [], f"CONTRIBUTING.md's Layout names modules that are not there: {stale}"
