"""What the patch points need of this process's start and of the cause probes (agent/patching/host.py): small
Protocols, so that patching/ imports neither the runtime nor causes/. Their promise: the runtime and the probes
provide every member they declare, and the patch points use no member of their host that they do not declare."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

from vllm_otel_startup.agent import patching
from vllm_otel_startup.agent.causes import Probes
from vllm_otel_startup.agent.patching.host import CallProbes, PatchHost

PATCHING = Path(patching.__file__).parent


def members(protocol: type) -> tuple[dict[str, object], dict[str, inspect.Signature]]:
    """A Protocol's declared attributes (name -> type) and methods (name -> signature)."""
    hints = typing.get_type_hints(protocol)
    methods = {n: inspect.signature(f) for n, f in vars(protocol).items()
               if inspect.isfunction(f) and not n.startswith("_")}
    return hints, methods


def same_parameters(got: inspect.Signature, declared: inspect.Signature) -> bool:
    """Called as the Protocol says: the same parameters, in order, with the same defaults."""
    def shape(sig: inspect.Signature) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]

    return shape(got) == shape(declared)


def test_a_started_runtime_provides_everything_a_patch_host_declares(start):
    rt = start("api_server").rt
    hints, methods = members(PatchHost)
    assert {"info", "active", "done", "probes", "local", "patch_applied"} <= set(hints)
    for name, hint in hints.items():
        assert hasattr(rt, name), f"Runtime has no {name} (PatchHost declares it)"
        origin = typing.get_origin(hint) or hint
        if origin in (bool, int, list, dict):
            assert isinstance(getattr(rt, name), origin), (name, getattr(rt, name))
    for name, declared in methods.items():
        got = getattr(rt, name, None)
        assert callable(got), f"Runtime has no method {name}"
        assert same_parameters(inspect.signature(got), declared), (name, inspect.signature(got), declared)


def test_the_runtimes_probes_are_the_call_probes_a_row_names(start):
    rt = start("api_server").rt
    assert isinstance(rt.probes, Probes)
    _, methods = members(CallProbes)
    assert set(methods) == {"after_call"}
    assert same_parameters(inspect.signature(rt.probes.after_call), methods["after_call"])


def host_members_used(path: Path) -> set[str]:
    """The members a module reads off its host: ``rt.X``, ``self.rt.X``, ``h.rt.X``."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            host = node.value
            if (isinstance(host, ast.Name) and host.id == "rt") or (isinstance(host, ast.Attribute)
                                                                      and host.attr == "rt"):
                used.add(node.attr)
    return used


def test_the_patch_points_use_only_what_a_patch_host_declares():
    hints, methods = members(PatchHost)
    typed = [p for p in sorted(PATCHING.glob("*.py")) if p.name != "host.py" and "PatchHost" in p.read_text()]
    assert {p.name for p in typed} >= {"compile_stages.py", "hooks.py", "wrappers.py"}
    for path in typed:
        used = host_members_used(path)
        assert used, path.name
        assert used <= set(hints) | set(methods), f"{path.name} uses {used - set(hints) - set(methods)} " \
                                                  "of its host, which PatchHost does not declare"
