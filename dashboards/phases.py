"""Curated phase lists (ids from ``semconv.PHASES``).

Phases nest (``model_load`` contains ``weights_load``; the API server's ``engine_wait`` contains the whole
EngineCore), so a stacked breakdown must only stack phases that never overlap in time on one start's critical
path. ``STACKED_PHASES`` is that list: leaf-level phases that are siblings or lie in different branches of
the tree (docs/telemetry.md, "One trace per start"), in the order a start runs them. Time none of them
covers (``kv_cache_profile`` outside ``torch_compile``, the handshake, ...) shows as "other".
"""

from __future__ import annotations

from vllm_otel_startup import semconv as sc

from . import vocabulary as v

# The span that covers each process kind's whole start; counting its observations counts that kind's processes.
PROCESS_PHASE: dict[str, str] = {v.API_SERVER: "startup", v.ENGINE_CORE: "engine_core_process",
                                 v.WORKER: "worker_process"}

STACKED_PHASES: tuple[str, ...] = (
    "interpreter_start",  # every process kind: each process's own, one after the other
    "imports",
    "process_entry",  # forked children instead of interpreter_start + imports
    "cli",
    "event_loop",
    "api_server_setup",
    "engine_args",
    "config",  # contains hf_config and model_inspection
    "tokenizer",
    "device_init",
    "model_init",  # model_load = model_init + weights_load + weights_postprocess (+ glue); model_create (>= 0.30) wraps model_init
    "weights_load",  # contains weights_download
    "weights_postprocess",
    "aot_load",
    "torch_compile",  # inside kv_cache_profile (the profile run's first forward compiles)
    "kv_cache_allocate",
    "kernel_warmup",
    "cudagraph_capture",
    "app_build",
    "app_state",
    "http_startup",
)

# Phases the regression alert compares against the fleet's own recent p95: the stack plus the composite phases
# the field's playbook talks about (download, KV-cache profiling, model inspection).
REGRESSION_PHASES: tuple[str, ...] = STACKED_PHASES + ("weights_download", "kv_cache_profile", "model_inspection")

for _p in (*PROCESS_PHASE.values(), *REGRESSION_PHASES):
    assert _p in sc.PHASES, _p


def regex(phases: tuple[str, ...] | list[str]) -> str:
    return "|".join(phases)
