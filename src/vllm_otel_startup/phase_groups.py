"""Phase groupings: each places every phase id (semconv.PHASES) in exactly one group, for one consumer: the
waterfall's colours (cli/waterfall.py), the predictor's fitted groups (model/predict.py) and the dashboards' stacked
breakdown (dashboards/phases.py). Standard library only, like semconv (tests/unit/test_phase_groups.py)."""

from __future__ import annotations

# Each grouping places every phase id in exactly one group; the phases a consumer leaves unclassified are
# listed under "other" by name, so a new phase must be placed here on purpose (tests/unit/test_phase_groups.py).
OTHER_GROUP = "other"

# The waterfall's colours (in legend order); "other" is drawn in neutral grey.
WATERFALL_GROUPS: dict[str, tuple[str, ...]] = {
    "bootstrap": ("interpreter_start", "imports", "cli", "event_loop", "process_entry"),
    "config": ("api_server_setup", "engine_args", "config", "hf_config", "model_inspection",
               "model_inspection_subprocess", "tokenizer"),
    "setup": ("async_llm_init", "llm_init", "engine_client", "engine_client_init", "engine_spawn", "api_server_spawn",
              "dp_coordinator_start", "engine_connect",
              "engine_core_init", "engine_init", "executor_init", "worker_spawn", "worker_init", "kernel_overrides",
              "device_init", "worker_handshake", "message_queue_init", "cpu_topology", "omp_binding"),
    "model": ("model_load", "model_loader", "model_create", "model_init", "weights_load", "weights_download",
              "weights_postprocess"),
    "compile": ("compile_warmup", "torch_compile", "aot_load", "dynamo_transform", "inductor_compile", "compile_graph"),
    "kv_cache": ("kv_cache_init", "kv_cache_profile", "kv_cache_allocate", "warmup", "kernel_warmup"),
    "cudagraphs": ("cudagraph_capture",),
    "http": ("app_build", "app_state", "http_server_setup", "http_startup"),
    OTHER_GROUP: ("startup", "engine_core_process", "worker_process", "api_server_process", "api_server_wait",
                  "frontend_handshake", "dp_group_init", "model_inspection_cache_save", "engine_wait",
                  "structured_output_init", "scheduler_init", "worker_wait", "cuda_init", "distributed_init",
                  "process_group_init", "model_parallel_init", "model_runner_init", "model_state_init",
                  "sampler_init", "profile_run", "compiled_first_run", "sampler_warmup", "cudagraph_memory_profile",
                  "torch_compile_stage", "aot_save", "kernel_autotune", "jit_warmup", "inductor_lazy_init",
                  "cudagraph_capture_mode", "gc", "module_import"),
}

# The predictor's disjoint groups, most specific first (a moment counted by an earlier group is not counted
# again); "other" is the rest of the start's duration.
PREDICT_GROUPS: dict[str, tuple[str, ...]] = {
    "compile": ("torch_compile", "aot_load", "dynamo_transform", "inductor_compile", "compile_graph", "compile_warmup"),
    "cudagraphs": ("cudagraph_capture",),
    "weights": ("weights_download", "weights_load", "weights_postprocess"),
    "model_init": ("model_create", "model_init"),
    "model_inspection": ("model_inspection", "model_inspection_subprocess"),
    "kv_cache": ("kv_cache_profile", "kv_cache_allocate", "kv_cache_init", "warmup", "kernel_warmup"),
    "http": ("app_build", "app_state", "http_server_setup", "http_startup", "api_server_setup"),
    "bootstrap": ("interpreter_start", "imports", "cli", "event_loop", "process_entry"),
    OTHER_GROUP: ("startup", "engine_core_process", "worker_process", "api_server_process", "api_server_spawn",
                  "api_server_wait", "dp_coordinator_start", "frontend_handshake", "dp_group_init", "engine_args",
                  "config", "hf_config",
                  "model_inspection_cache_save", "async_llm_init", "llm_init", "tokenizer", "engine_client",
                  "engine_client_init",
                  "engine_spawn", "engine_wait", "engine_connect", "engine_core_init", "engine_init", "executor_init",
                  "structured_output_init", "scheduler_init", "worker_spawn", "worker_wait", "worker_init",
                  "worker_handshake", "message_queue_init", "cpu_topology", "omp_binding", "kernel_overrides",
                  "device_init", "cuda_init",
                  "distributed_init", "process_group_init",
                  "model_parallel_init", "model_runner_init", "model_load", "model_loader", "model_state_init",
                  "sampler_init", "profile_run", "compiled_first_run", "sampler_warmup", "cudagraph_memory_profile",
                  "torch_compile_stage", "aot_save", "kernel_autotune", "jit_warmup", "inductor_lazy_init",
                  "cudagraph_capture_mode", "gc", "module_import"),
}

# The dashboards' stacked breakdown: leaf-level phases that never overlap on one start's critical path, in
# the order a start runs them (dashboards/phases.py checks that none contains another); "other" is what the
# breakdown shows as the time none of them covers.
STACKED_GROUPS: dict[str, tuple[str, ...]] = {
    "stacked": ("interpreter_start", "imports", "process_entry", "cli", "event_loop", "api_server_setup",
                "engine_args", "config", "tokenizer", "device_init", "model_init", "weights_load",
                "weights_postprocess", "model_state_init", "sampler_init", "aot_load", "torch_compile",
                "compiled_first_run", "sampler_warmup", "cudagraph_memory_profile", "kv_cache_allocate",
                "scheduler_init", "kernel_warmup", "cudagraph_capture", "jit_warmup", "inductor_lazy_init",
                "app_build", "app_state", "http_server_setup", "http_startup"),
    OTHER_GROUP: ("startup", "engine_core_process", "worker_process", "api_server_process", "api_server_spawn",
                  "api_server_wait", "dp_coordinator_start", "frontend_handshake", "dp_group_init", "hf_config",
                  "model_inspection",
                  "model_inspection_subprocess", "model_inspection_cache_save", "async_llm_init", "llm_init",
                  "engine_client",
                  "engine_client_init", "engine_spawn", "engine_wait", "engine_connect", "engine_core_init",
                  "engine_init", "executor_init", "structured_output_init", "worker_spawn", "worker_wait",
                  "worker_init", "worker_handshake", "message_queue_init", "cpu_topology", "omp_binding",
                  "kernel_overrides", "cuda_init",
                  "distributed_init", "process_group_init",
                  "model_parallel_init", "model_runner_init", "model_load", "model_loader", "model_create",
                  "weights_download", "kv_cache_init", "kv_cache_profile", "profile_run", "warmup", "compile_warmup",
                  "torch_compile_stage", "aot_save", "kernel_autotune", "dynamo_transform", "inductor_compile",
                  "compile_graph", "cudagraph_capture_mode", "gc", "module_import"),
}

PHASE_GROUPINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "waterfall": WATERFALL_GROUPS, "predict": PREDICT_GROUPS, "stacked": STACKED_GROUPS,
}
