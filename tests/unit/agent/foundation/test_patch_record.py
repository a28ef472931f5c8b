"""What the patch points did in this process (agent/foundation/patch_record.py): counts and names the process span
carries at its end; a forked child starts its own record of failures but keeps the patches it inherited."""

from __future__ import annotations

from vllm_otel_startup.agent.foundation.patch_record import PatchRecord


def test_a_new_record_has_nothing_applied_missing_or_failed():
    r = PatchRecord()
    assert (r.patch_applied, r.patch_native, r.patch_frameless) == (0, 0, 0)
    assert r.patch_missing == [] and r.patch_failed == [] and r.last_error is None
    assert r.native_phases == {} and r.native_effects == {}


def test_each_record_is_its_own():
    a, b = PatchRecord(), PatchRecord()
    a.patch_missing.append("vllm.x:f")
    a.native_phases["vLLM span"] = "weights_load"
    assert b.patch_missing == [] and b.native_phases == {}


def test_reset_failures_forgets_the_failures_but_keeps_what_is_patched():
    r = PatchRecord()
    r.patch_applied, r.patch_native, r.patch_frameless = 30, 4, 2
    r.native_phases["Model load"] = "weights_load"
    seen: list[BaseException | None] = []
    r.native_effects["Model load"] = seen.append
    r.patch_missing.append("vllm.a:gone")
    r.patch_failed.append("vllm.b:broken")
    r.last_error = RuntimeError("boom")
    missing_before = r.patch_missing
    r.reset_failures()
    assert r.patch_missing == [] and r.patch_failed == [] and r.last_error is None
    assert missing_before == ["vllm.a:gone"]  # a new list: the parent's record is not emptied under it
    # the wrappers a forked child inherited are still in place: so are their counts and vLLM's span names
    assert (r.patch_applied, r.patch_native, r.patch_frameless) == (30, 4, 2)
    assert r.native_phases == {"Model load": "weights_load"}
    r.native_effects["Model load"](None)
    assert seen == [None]
