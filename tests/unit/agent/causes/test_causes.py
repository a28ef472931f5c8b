"""The cause probes' registry (agent/causes/__init__.py): its table is true to the probe classes, the patch
table's probe names are known without importing a family module, and a family module is imported only when one
of its probes is first needed, once per process, fail-soft."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from vllm_otel_startup.agent import causes
from vllm_otel_startup.agent.causes.base import Call, Probe

FAMILIES = ("config", "weights", "compile", "cudagraphs", "hub")


def _classes() -> dict[str, type[Probe]]:
    """Every probe class the family modules define, as ``"module:Class"``."""
    found = {}
    for family in FAMILIES:
        mod = importlib.import_module(f"vllm_otel_startup.agent.causes.{family}")
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, Probe) and obj is not Probe and obj.__module__ == mod.__name__:
                found[f"{family}:{name}"] = obj
    return found


def test_the_registry_names_each_probe_by_its_own_names_and_phase():
    classes = _classes()
    calls = {n: t for t, cls in classes.items() for n in (cls.names or (cls.name,)) if n}
    phases = {cls.phase: t for t, cls in classes.items() if cls.phase}
    assert calls == causes.CALL_PROBES
    assert phases == causes.PHASE_PROBES
    assert frozenset(calls) == causes.CALL_PROBE_NAMES
    assert {*causes.CALL_PROBES.values(), *causes.PHASE_PROBES.values()} == set(classes)  # every class registered
    for target, cls in classes.items():
        assert causes.load(target) is cls


def test_importing_the_package_imports_no_family_module_and_nothing_outside_the_standard_library():
    code = textwrap.dedent("""
        import sys
        import vllm_otel_startup.agent
        before = set(sys.modules)
        import vllm_otel_startup.agent.causes as causes
        new = set(sys.modules) - before
        stdlib = set(sys.stdlib_module_names)
        print(sorted(m for m in new if m.split(".")[0] not in stdlib))
        assert "config" in causes.CALL_PROBE_NAMES and "load_weights" in causes.CALL_PROBE_NAMES
        print(sorted(m for m in sys.modules if m.startswith("vllm_otel_startup.agent.causes.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    # the foundation modules the base reads (the probes' Call, the per-span slot) are standard library only too
    assert set(eval(out[0])) <= {"vllm_otel_startup.agent.causes", "vllm_otel_startup.agent.causes.base",
                                 "vllm_otel_startup.agent.foundation", "vllm_otel_startup.agent.foundation.calls",
                                 "vllm_otel_startup.agent.foundation.span_store"}
    assert eval(out[1]) == ["vllm_otel_startup.agent.causes.base"]


def test_a_family_module_is_imported_on_first_use_of_one_of_its_probes():
    code = textwrap.dedent("""
        import sys
        from types import SimpleNamespace
        from vllm_otel_startup.agent import causes

        def loaded():
            return sorted(m.rpartition(".")[2] for m in sys.modules if m.startswith("vllm_otel_startup.agent.causes."))

        rt = SimpleNamespace(facts={})
        probes = causes.Probes(rt)
        print(loaded())
        probes.on_start("some_phase_without_a_probe", None)
        probes.after_call("not_a_probe", None, causes.Call(None, (), {}, None))
        print(loaded())
        probes.after_call("config", None, causes.Call(None, (), {}, SimpleNamespace()))
        print(loaded())
        probes.on_start("weights_load", None)
        print(loaded())
        print([type(p).__name__ for p in probes.all])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert [eval(line) for line in out] == [
        ["base"], ["base"], ["base", "config"], ["base", "config", "weights"], ["ConfigFacts", "WeightsLoad"]]


def test_one_probe_serves_all_its_names_and_its_phase():
    probes = causes.Probes(SimpleNamespace(facts={}))
    for name in ("weights_loader", "prepare_weights", "weight_files", "streamer_request", "load_weights"):
        probes.after_call(name, None, Call(None, (), {}, None))
    probes.on_ending("weights_load", SimpleNamespace(attributes={}, set_attributes=lambda a: None, start_time=0))
    (weights,) = probes.all
    assert type(weights).__name__ == "WeightsLoad"
    assert {probes.by_name[n] for n in causes.CALL_PROBES if causes.CALL_PROBES[n] == "weights:WeightsLoad"} == {
        weights}
    assert probes.by_phase["weights_load"] is weights


def test_a_probe_that_fails_to_load_only_loses_its_attributes(monkeypatch):
    monkeypatch.setitem(causes.CALL_PROBES, "config", "no_such_family:ConfigFacts")
    rt = SimpleNamespace(facts={})
    probes = causes.Probes(rt)
    probes.after_call("config", None, Call(None, (), {}, SimpleNamespace()))
    probes.after_call("config", None, Call(None, (), {}, SimpleNamespace()))  # not tried again
    assert probes.all == [] and probes.by_name == {"config": None} and rt.facts == {}


def test_probes_left_out_load_nothing(monkeypatch):
    from vllm_otel_startup import diagnostics

    monkeypatch.setenv(diagnostics.OFF.name, "probes")
    probes = causes.Probes(SimpleNamespace(facts={}))
    probes.after_call("config", None, Call(None, (), {}, SimpleNamespace()))
    probes.on_start("torch_compile", None)
    assert probes.all == []
