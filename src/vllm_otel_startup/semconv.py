"""The public vocabulary: span names, phases and attribute names (documented in docs/telemetry.md).

Span names follow vLLM's own startup spans (>= 0.16: "Load weights", "Init device", ...) so a mixed
fleet reads the same; every startup span, vLLM's or ours, also carries ``vllm.startup.phase``, a stable
snake_case id that dashboards and tests key on.
"""

from __future__ import annotations

INSTRUMENTATION_NAME = "vllm_otel_startup"

# --- span names we emit (vLLM's native names are listed in patch_points.NATIVE_SPANS) -------------
ROOT_SPAN = "vLLM startup"
ENGINE_CORE_PROCESS_SPAN = "EngineCore process"
WORKER_PROCESS_SPAN = "Worker process"
INTERPRETER_START_SPAN = "Interpreter start"
IMPORTS_SPAN = "Imports"
CLI_SPAN = "CLI parsing"
EVENT_LOOP_SPAN = "Event loop start"
PROCESS_ENTRY_SPAN = "Process entry"
AOT_LOAD_SPAN = "AOT cache load"

# --- attributes -------------------------------------------------------------------------------------
PHASE = "vllm.startup.phase"  # str: stable phase id
PROCESS_KIND = "vllm.startup.process_kind"  # str: api_server | engine_core | worker
NATIVE = "vllm.startup.native"  # bool: the span was emitted by vLLM itself and adopted
WAITING = "vllm.startup.waiting"  # bool: the span only waits for another process
OUTCOME = "vllm.startup.outcome"  # str: ready | failed (root and process spans)
MODE = "vllm.startup.mode"  # str: cold | warm (vLLM cache root empty or not at process start)
UNEXPLAINED_S = "vllm.startup.unexplained_s"  # float s: process-span time no child span covers
LARGEST_GAP_S = "vllm.startup.largest_gap_s"  # float s: largest uncovered interval in that process
LARGEST_GAP_AFTER = "vllm.startup.largest_gap_after"  # str: name of the span that ends before it
PATCH_APPLIED = "vllm.startup.patch_points.applied"  # int
PATCH_NATIVE = "vllm.startup.patch_points.native"  # int: targets already traced by vLLM itself
PATCH_MISSING = "vllm.startup.patch_points.missing"  # str[]: targets expected in this version, absent
PROCESS_CREATE_TIME_SOURCE = "vllm.startup.create_time_source"  # str: proc | clock

VLLM_VERSION = "vllm.version"
TORCH_VERSION = "vllm.torch.version"
MODEL = "vllm.model"
SERVED_MODEL_NAME = "vllm.served_model_name"
DTYPE = "vllm.dtype"
TP_SIZE = "vllm.parallel.tensor_size"
PP_SIZE = "vllm.parallel.pipeline_size"
DP_SIZE = "vllm.parallel.data_size"
DEVICE = "vllm.device"  # str: cuda | cpu | ... (platform device type)
ENFORCE_EAGER = "vllm.enforce_eager"
COMPILATION_MODE = "vllm.compile.mode"
MAX_MODEL_LEN = "vllm.max_model_len"
WORKER_RANK = "vllm.worker.rank"

MODEL_INSPECTION_CACHE_HIT = "vllm.model_inspection.cache_hit"

WEIGHTS_SOURCE = "vllm.weights.source"  # local_dir | hub_cache | hub_download | streamer | tensorizer | dummy | other
WEIGHTS_LOAD_FORMAT = "vllm.weights.load_format"
WEIGHTS_BYTES = "vllm.weights.bytes"  # int By: weight file bytes read by this load
WEIGHTS_FILES = "vllm.weights.files"  # int
WEIGHTS_GBPS = "vllm.weights.throughput_gb_per_s"  # float GB/s (1e9 bytes) over the Load weights span
DOWNLOAD_BYTES = "vllm.weights.download_bytes"  # int By: bytes fetched from the hub during this start

COMPILE_CACHE_HIT = "vllm.compile.cache_hit"  # bool: compiled code came from a cache (no compile work)
COMPILE_FX_HITS = "vllm.compile.inductor_cache_hits"  # int
COMPILE_FX_MISSES = "vllm.compile.inductor_cache_misses"  # int
COMPILE_AUTOGRAD_HITS = "vllm.compile.autograd_cache_hits"  # int
COMPILE_AUTOGRAD_MISSES = "vllm.compile.autograd_cache_misses"  # int
COMPILE_CPP_BUILDS = "vllm.compile.cpp_builds"  # int: C++ compiler runs for generated kernels (CPU)
COMPILE_AOT_LOADED = "vllm.compile.aot_loaded"  # bool: AOT artifact loaded (no Dynamo run)
COMPILE_AOT_LOAD_ERROR = "vllm.compile.aot_load_error"  # str: why an existing AOT artifact was not used
COMPILE_UNIQUE_GRAPHS = "vllm.compile.unique_graphs"  # int: Dynamo graphs captured
COMPILE_CACHE_DIR = "vllm.compile.cache_dir"  # str

KV_CACHE_BYTES = "vllm.kv_cache.bytes"  # int By: memory given to the KV cache
KV_CACHE_BLOCKS = "vllm.kv_cache.blocks"  # int
CUDAGRAPH_COUNT = "vllm.cudagraph.count"  # int: CUDA graphs captured
CUDAGRAPH_CAPTURE_SIZES = "vllm.cudagraph.capture_sizes"  # int: batch sizes configured for capture

ERROR_TYPE = "error.type"  # OTel semconv

# --- phase ids (closed list; docs/telemetry.md) ----------------------------------------------------
PHASES: dict[str, str] = {
    "startup": "whole start, API-server process creation to HTTP accepting (root)",
    "engine_core_process": "EngineCore process, creation to READY sent",
    "worker_process": "worker process, creation to its last startup RPC",
    "interpreter_start": "process creation to our hook (interpreter, site, OpenTelemetry SDK init)",
    "imports": "our hook to the first vLLM startup call (module imports, spawn unpickling)",
    "cli": "CLI setup and argument parsing",
    "event_loop": "event-loop start before the server entry",
    "process_entry": "a forked child: from the fork to its first vLLM startup call",
    "api_server_setup": "socket bind and argument logging",
    "engine_args": "engine arguments from the CLI (validation, model path resolution)",
    "config": "engine config resolution",
    "hf_config": "Hugging Face config load",
    "model_inspection": "model architecture inspection (modelinfo cache or subprocess)",
    "model_inspection_subprocess": "model-class inspection in a subprocess (cache miss)",
    "async_llm_init": "AsyncLLM construction",
    "tokenizer": "tokenizer / renderer init",
    "engine_client": "engine-core client (Overall Loading)",
    "engine_client_init": "AsyncMPClient / MPClient init",
    "engine_spawn": "EngineCore process start",
    "engine_wait": "waiting for EngineCore READY (handshake)",
    "engine_core_init": "EngineCoreProc init (handshake + engine init)",
    "engine_init": "EngineCore init",
    "executor_init": "executor init",
    "worker_spawn": "worker process start",
    "worker_wait": "waiting for workers READY",
    "worker_init": "worker init",
    "device_init": "device and distributed init",
    "model_load": "model load (runner)",
    "model_loader": "model load (loader)",
    "model_create": "model creation: module construction plus inspection logging (vLLM's 'Initializing model took')",
    "model_init": "model module construction",
    "weights_load": "weights load (includes a lazy download)",
    "weights_download": "weights download from the hub",
    "weights_postprocess": "weight post-processing into kernel formats",
    "kv_cache_init": "KV-cache profiling, allocation and warm-up (Prepare model)",
    "kv_cache_profile": "KV-cache memory profiling",
    "kv_cache_allocate": "KV-cache allocation",
    "warmup": "compile or warm up model",
    "compile_warmup": "warm-up run that triggers torch.compile",
    "torch_compile": "torch.compile (Dynamo + backend)",
    "aot_load": "load of a saved AOT-compiled artifact (a failure means compile again)",
    "kernel_warmup": "kernel warm-up (DeepGemm, CuTeDSL, ...)",
    "dynamo_transform": "Dynamo bytecode transform",
    "inductor_compile": "Inductor compilation",
    "compile_graph": "compile one graph (cache load or compile)",
    "cudagraph_capture": "CUDA-graph capture",
    "app_build": "FastAPI app build",
    "app_state": "app state init",
    "http_startup": "uvicorn startup: lifespan and listen",
}
