"""Curated phase lists (ids from ``semconv.PHASES``).

Phases nest (``model_load`` contains ``weights_load``; the API server's ``engine_wait`` contains the whole
EngineCore), so a stacked breakdown must only stack phases that never overlap in time on one start's critical
path. ``STACKED_PHASES`` is that list: leaf-level phases that are siblings or lie in different branches of
the tree (docs/telemetry.md, "One trace per start"), in the order a start runs them. Time none of them
covers (``kv_cache_profile`` outside ``torch_compile``, the handshake, ...) shows as "other".
"""

from __future__ import annotations

from vllm_otel_startup import phase_groups as pg
from vllm_otel_startup import semconv as sc

from . import vocabulary as v

# The span that covers each process kind's whole start; counting its observations counts that kind's processes.
PROCESS_PHASE: dict[str, str] = {v.API_SERVER: "startup", v.ENGINE_CORE: "engine_core_process",
                                 v.WORKER: "worker_process"}

# Declared with the other phase groupings in semconv (every phase placed; a new one lands in "other" only
# when listed there).
STACKED_PHASES: tuple[str, ...] = pg.STACKED_GROUPS["stacked"]

# Phases the regression alert compares against the fleet's own recent p95: the stack plus the composite phases
# the field's playbook talks about (download, KV-cache profiling, model inspection).
REGRESSION_PHASES: tuple[str, ...] = STACKED_PHASES + ("weights_download", "kv_cache_profile", "model_inspection")

# Phases whose span only waits for another process (engine_wait, worker_wait): a start is never stuck there, the
# process it waits for is in the phase to blame (the stuck-in-phase alert leaves them out).
WAITING_PHASES: tuple[str, ...] = tuple(sorted(sc.WAITING_PHASES))

# Detail spans (semconv.DETAIL_PHASES: PyTorch's compile regions, garbage collections, imports) run inside any
# phase; they are never stacked.
DETAIL: tuple[str, ...] = tuple(sorted(sc.DETAIL_PHASES))

# Which phases can run inside which (in time, across processes: the API server's engine_wait spans the whole
# EngineCore), after docs/telemetry.md's tree; a child may sit under different parents on different platforms
# or versions. tests/fleet checks that STACKED_PHASES holds no phase together with one inside it, and that
# every phase id is placed here.
CONTAINS: dict[str, tuple[str, ...]] = {
    "startup": ("interpreter_start", "imports", "process_entry", "cli", "event_loop", "api_server_setup",
                "engine_args", "config", "async_llm_init", "llm_init", "app_build", "app_state", "http_server_setup",
                "http_startup",
                # a launcher of several API servers (data parallel, --api-server-count > 1)
                "dp_coordinator_start", "engine_spawn", "engine_wait", "api_server_spawn", "api_server_wait", *DETAIL),
    "api_server_wait": ("api_server_process",),
    "api_server_process": ("interpreter_start", "imports", "engine_args", "config", "async_llm_init", "app_build",
                           "app_state", "http_server_setup", "http_startup"),
    "config": ("hf_config", "model_inspection"),
    "model_inspection": ("model_inspection_subprocess", "model_inspection_cache_save"),
    "async_llm_init": ("tokenizer", "engine_client"),
    # a program of the user's: LLM(...) builds the config and the engine-core client (spawn and handshake) itself
    "llm_init": ("engine_args", "config", "tokenizer", "engine_spawn", "engine_wait", "engine_connect"),
    "engine_client": ("engine_client_init",),
    "engine_client_init": ("engine_spawn", "engine_wait", "engine_connect"),
    "engine_wait": ("engine_core_process",),
    "engine_core_process": ("interpreter_start", "imports", "process_entry", "engine_core_init", "hf_config",
                            "model_inspection", "tokenizer"),
    "engine_core_init": ("engine_init", "frontend_handshake", "dp_group_init"),
    "engine_init": ("executor_init", "kv_cache_init", "structured_output_init", "scheduler_init"),
    "structured_output_init": ("tokenizer",),
    # worker phases run in worker processes, or in the EngineCore with an in-process executor
    "executor_init": ("worker_spawn", "worker_wait", "worker_handshake", "worker_process", "worker_init", "device_init",
                      "model_load"),
    "worker_wait": ("worker_process",),
    "kv_cache_init": ("worker_process", "kv_cache_profile", "kv_cache_allocate", "warmup"),
    "worker_process": ("interpreter_start", "imports", "process_entry", "worker_init", "device_init", "model_load",
                       "kv_cache_profile", "kv_cache_allocate", "warmup", "hf_config", "model_inspection"),
    "worker_init": ("kernel_overrides", "device_init", "message_queue_init"),
    "device_init": ("cuda_init", "distributed_init", "model_runner_init", "cpu_topology", "omp_binding"),
    "distributed_init": ("process_group_init", "model_parallel_init"),
    "model_load": ("model_loader", "model_state_init", "sampler_init"),
    "model_loader": ("model_create", "model_init", "weights_load", "weights_postprocess"),
    "model_create": ("model_init",),
    "weights_load": ("weights_download",),
    "kv_cache_profile": ("compile_warmup", "profile_run", "aot_load", "torch_compile", "cudagraph_memory_profile"),
    "compile_warmup": ("profile_run", "aot_load", "torch_compile"),
    "profile_run": ("aot_load", "torch_compile", "compiled_first_run", "sampler_warmup"),
    "aot_load": ("torch_compile_stage",),
    "torch_compile": ("dynamo_transform", "inductor_compile", "aot_save", "torch_compile_stage"),
    "inductor_compile": ("compile_graph",),
    "warmup": ("kernel_warmup", "cudagraph_capture", "compile_graph", "jit_warmup", "inductor_lazy_init"),
    "kernel_warmup": ("kernel_autotune",),
    "cudagraph_capture": ("cudagraph_capture_mode",),
}

for _p in (*PROCESS_PHASE.values(), *REGRESSION_PHASES, *CONTAINS, *(c for cs in CONTAINS.values() for c in cs)):
    assert _p in sc.PHASES, _p


def inside(phase: str) -> set[str]:
    """Every phase that can run inside ``phase`` (transitively)."""
    out: set[str] = set()
    todo = list(CONTAINS.get(phase, ()))
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(CONTAINS.get(p, ()))
    return out


def regex(phases: tuple[str, ...] | list[str]) -> str:
    return "|".join(phases)
