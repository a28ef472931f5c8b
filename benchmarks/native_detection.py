"""Native-span detection against vLLM's REAL tracing code of every release (a measurement, never run by the tests).

For each release of tools/qualname_inventory.py's list whose wheel has vLLM's tracing package (0.16+), the
package's own files are taken from the cached wheel into a scratch tree (with a stand-in ``vllm.logger`` and
``vllm.utils.func_utils``, the only other vLLM modules it imports), a function of a ``vllm.*`` module is decorated
with that release's ``@instrument(span_name=...)``, and ``hooks.native_span`` must read the span name back; the same
function decorated by a look-alike (a non-vLLM module's OpenTelemetry decorator) must not be taken for it. Needs a
Python with OpenTelemetry's SDK and OTLP exporters (the e2e venv):

    ~/.cache/vllm-otel-startup/e2e/venv-vllm/bin/python -m benchmarks native-detection
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks import command_parser
from tools.qualname_inventory import RELEASES, ROOT, wheel

STUBS = {
    "vllm/__init__.py": "",
    "vllm/logger.py": "import logging\n\ndef init_logger(name):\n    return logging.getLogger(name)\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/func_utils.py": "def run_once(f):\n    return f\n",
}

PROBE = r'''
import functools, sys, types
from opentelemetry import trace
from vllm.tracing import instrument
from vllm_otel_startup.agent.patching.hooks import native_span

def target_in(module_name):
    mod = types.ModuleType(module_name)
    sys.modules[module_name] = mod
    exec("def load_weights(self):\n    return 1\n", mod.__dict__)
    return mod.load_weights

def look_alike(func):  # another library's tracing decorator
    @functools.wraps(func)
    def wrapper(*a, **k):
        with trace.get_tracer("x").start_as_current_span("x"):
            return func(*a, **k)
    return wrapper

real = instrument(span_name="Load weights")(target_in("vllm.model_executor.model_loader.default_loader"))
bare = instrument(target_in("vllm.v1.worker.gpu_worker"))
print(native_span(real), "|", native_span(bare), "|", native_span(look_alike(target_in("mylib.loader"))),
      "|", real.__code__.co_filename.split("vllm/", 1)[-1])
'''


def check(release: str, log) -> str | None:
    whl = wheel(release, log)
    if whl is None:
        return None
    with zipfile.ZipFile(whl) as zf, tempfile.TemporaryDirectory() as tmp:
        files = [n for n in zf.namelist() if n.startswith("vllm/tracing/") and n.endswith(".py")]
        if not files:
            return "no vllm/tracing package"
        for rel, text in [*STUBS.items(), *((n, zf.read(n).decode()) for n in files)]:
            path = Path(tmp, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT / 'src'}"}
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=tmp)
        return done.stdout.strip() if done.returncode == 0 else f"failed: {done.stderr.strip().splitlines()[-1:]}"


def main(argv: list[str] | None = None) -> int:
    command_parser("native-detection", __doc__).parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    bad = 0
    print("release | @instrument(span_name='Load weights') | bare @instrument | look-alike | wrapper's file")
    for release in RELEASES:
        got = check(release, log)
        if got is None or got == "no vllm/tracing package":
            print(f"{release} | {got or 'no wheel'}")
            continue
        parts = [p.strip() for p in got.split("|")]
        ok = parts[:3] == ["Load weights", "load_weights", "None"]
        bad += not ok
        print(f"{release} | {' | '.join(parts)} | {'ok' if ok else 'WRONG'}")
    return 1 if bad else 0
