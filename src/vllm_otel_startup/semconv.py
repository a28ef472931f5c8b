"""The public vocabulary: span names, phases and attribute names (documented in docs/telemetry.md and metrics.md).

Span names follow vLLM's own startup spans (>= 0.16: "Load weights", "Init device", ...) so a mixed
fleet reads the same; every startup span, vLLM's or ours, also carries ``vllm.startup.phase``, a stable
snake_case id that dashboards and tests key on.
"""

from __future__ import annotations

from vllm_otel_startup import phase_groups

INSTRUMENTATION_NAME = "vllm_otel_startup"

# --- span names we emit (vLLM's native names are listed in patch_points.NATIVE_SPANS) -------------
ROOT_SPAN = "vLLM startup"
ENGINE_CORE_PROCESS_SPAN = "EngineCore process"
WORKER_PROCESS_SPAN = "Worker process"
API_SERVER_PROCESS_SPAN = "API server process"  # one of several API servers (--api-server-count, data parallel)
API_SERVERS_WAIT_SPAN = "API servers ready"  # the launcher waiting for its API server processes (waiting)
INTERPRETER_START_SPAN = "Interpreter start"
IMPORTS_SPAN = "Imports"
CLI_SPAN = "CLI parsing"
EVENT_LOOP_SPAN = "Event loop start"
PROCESS_ENTRY_SPAN = "Process entry"
AOT_LOAD_SPAN = "AOT cache load"
WORKER_INIT_SPAN = "Worker init"
WORKER_CONSTRUCTION_SPAN = "Worker construction"  # vLLM's inner `Worker init` (the worker object's construction)
GC_SPAN = "Garbage collection"
IMPORT_SPAN = "Module import"
PROGRESS_SPAN = "Startup in progress"  # a zero-length record of a start still running (agent/live/progress.py)

# --- Kubernetes identity: resource attribute -> the environment variables our distro reads it from, first set
# wins (downward-API environment variables)
K8S_ENV: dict[str, tuple[str, ...]] = {
    "k8s.pod.name": ("K8S_POD_NAME", "POD_NAME"),
    "k8s.pod.uid": ("K8S_POD_UID", "POD_UID"),
    "k8s.namespace.name": ("K8S_NAMESPACE_NAME", "K8S_POD_NAMESPACE", "POD_NAMESPACE"),
    "k8s.node.name": ("K8S_NODE_NAME", "NODE_NAME"),
    "k8s.container.name": ("K8S_CONTAINER_NAME", "CONTAINER_NAME"),
    "k8s.deployment.name": ("K8S_DEPLOYMENT_NAME",),
    "k8s.cluster.name": ("K8S_CLUSTER_NAME",),
}

# --- attributes -------------------------------------------------------------------------------------
PHASE = "vllm.startup.phase"  # str: stable phase id
PROCESS_KIND = "vllm.startup.process_kind"  # str: api_server | engine_core | worker
NATIVE = "vllm.startup.native"  # bool: the span was emitted by vLLM itself and adopted
WAITING = "vllm.startup.waiting"  # bool: the span only waits for another process
OUTCOME = "vllm.startup.outcome"  # str: ready | failed (root and process spans)
MODE = "vllm.startup.mode"  # str: cold | warm (vLLM cache root empty or not at process start)
UNEXPLAINED_S = "vllm.startup.unexplained_s"  # float s: process-span time no leaf span of the process covers
LARGEST_GAP_S = "vllm.startup.largest_gap_s"  # float s: largest uncovered interval in that process
LARGEST_GAP_AFTER = "vllm.startup.largest_gap_after"  # str: name of the span that ends before it
PATCH_APPLIED = "vllm.startup.patch_points.applied"  # int
PATCH_NATIVE = "vllm.startup.patch_points.native"  # int: targets already traced by vLLM itself
PATCH_FRAMELESS = "vllm.startup.patch_points.frameless"  # int: of the applied, traced by sys.monitoring (no wrapper)
PATCH_MISSING = "vllm.startup.patch_points.missing"  # str[]: targets expected in this version, absent
PATCH_FAILED = "vllm.startup.patch_points.failed"  # str[]: targets found but that could not be wrapped
PROCESS_CREATE_TIME_SOURCE = "vllm.startup.create_time_source"  # str: proc | fork | engine | clock

VLLM_VERSION = "vllm.version"
TORCH_VERSION = "vllm.torch.version"
MODEL = "vllm.model"
SERVED_MODEL_NAME = "vllm.served_model_name"
DTYPE = "vllm.dtype"
TP_SIZE = "vllm.parallel.tensor_size"
PP_SIZE = "vllm.parallel.pipeline_size"
DP_SIZE = "vllm.parallel.data_size"
DEVICE = "vllm.device"  # str: cuda | cpu | ... (platform device type)
DEVICE_MODEL = "vllm.device.model"  # str: GPU product name (NVML) or CPU model name
ENFORCE_EAGER = "vllm.enforce_eager"
COMPILATION_MODE = "vllm.compile.mode"
MAX_MODEL_LEN = "vllm.max_model_len"
WORKER_RANK = "vllm.worker.rank"
DP_RANK = "vllm.parallel.data_rank"  # int: an EngineCore's data-parallel rank (several EngineCores)
PARALLEL_BACKEND = "vllm.parallel.backend"  # str: the process group's communicator backend (nccl, gloo, ...)
PARALLEL_WORLD_SIZE = "vllm.parallel.world_size"  # int: ranks in the process group this rank joined
API_SERVER_INDEX = "vllm.api_server.index"  # int: an API server's index (several API servers)

MODEL_INSPECTION_CACHE_HIT = "vllm.model_inspection.cache_hit"
GC_GENERATION = "vllm.gc.generation"  # int: the generation collected (2: full)
GC_COLLECTED = "vllm.gc.collected"  # int: unreachable objects found
THREAD_NAME = "thread.name"  # str (OTel semconv): the thread that triggered a collection, where not the main one
IMPORT_MODULE = "vllm.import.module"  # str: the module whose (outermost) import the span covers

# where the bytes came from: local_dir | hub_cache | hub_download | object_store | daemon | peer | dummy | other
# (how they were read is vllm.weights.loader: a streamer reads a local directory or an object store)
WEIGHTS_SOURCE = "vllm.weights.source"
WEIGHTS_LOAD_FORMAT = "vllm.weights.load_format"  # effective load format: the one the loader that ran reads
WEIGHTS_LOAD_FORMAT_REQUESTED = "vllm.weights.load_format_requested"  # --load-format as given (auto, ...)
WEIGHTS_LOAD_FORMAT_REASON = "vllm.weights.load_format_reason"  # why effective != requested (auto, fallback)
WEIGHTS_LOADER = "vllm.weights.loader"  # default | runai_streamer | tensorizer | sharded_state | dummy | ...
WEIGHTS_STREAMER_CONCURRENCY = "vllm.weights.streamer_concurrency"  # int: Run:ai streamer reader threads
WEIGHTS_BYTES = "vllm.weights.bytes"  # int By: weight file bytes read by this load
WEIGHTS_FILES = "vllm.weights.files"  # int
WEIGHTS_GBPS = "vllm.weights.throughput_gb_per_s"  # float GB/s (1e9 bytes) over the Load weights span
DOWNLOAD_BYTES = "vllm.weights.download_bytes"  # int By: bytes fetched from the hub during this start
DOWNLOAD_FILES = "vllm.weights.download_files"  # int: files fetched from the hub during this start
DOWNLOAD_GBPS = "vllm.weights.download_throughput_gb_per_s"  # float GB/s: download_bytes over the download span
WEIGHTS_FILESYSTEM = "vllm.weights.filesystem"  # str: file-system type of the weight files (/proc/self/mounts)

# compile-cache forensics: vLLM's cache key and its factors as vLLM computed them (never re-derived)
COMPILE_CACHE_KEY = "vllm.compile.cache_key"  # str: the key (the torch_compile_cache/<key> directory)
COMPILE_FACTOR_ENV = "vllm.compile.factors.env_hash"  # str: vLLM's hash of its env factors
COMPILE_FACTOR_CONFIG = "vllm.compile.factors.config_hash"  # str: VllmConfig.compute_hash()
COMPILE_FACTOR_CODE = "vllm.compile.factors.code_hash"  # str: hash of the traced source files
COMPILE_FACTOR_COMPILER = "vllm.compile.factors.compiler_hash"  # str: the compiler's (torch/Inductor) hash
COMPILE_FACTORS_SOURCE = "vllm.compile.factors.source"  # str: where the factors were read (or why not)
# per-factor digests (name -> 6 hex of the value's sha256, compact JSON): diffable, never the raw values
COMPILE_FACTOR_ENV_DIGEST = "vllm.compile.factors.env_digest"  # str JSON: env factor name -> digest
COMPILE_FACTOR_CONFIG_DIGEST = "vllm.compile.factors.config_digest"  # str JSON: sub-config -> {"#": h, field: h}
COMPILE_NEAREST_KEY = "vllm.compile.nearest_cached_key"  # str: the other key on this cache root closest to this one
COMPILE_CHANGED_FACTORS = "vllm.compile.changed_factors"  # str[]: env:NAME | config | code | compiler vs that key
COMPILE_OTHER_KEYS = "vllm.compile.other_cached_keys"  # int: keys other than this one cached on the same root

COMPILE_CACHE_HIT = "vllm.compile.cache_hit"  # bool: compiled code came from a cache (no compile work)
COMPILE_FX_HITS = "vllm.compile.inductor_cache_hits"  # int
COMPILE_FX_MISSES = "vllm.compile.inductor_cache_misses"  # int
COMPILE_AUTOGRAD_HITS = "vllm.compile.autograd_cache_hits"  # int
COMPILE_AUTOGRAD_MISSES = "vllm.compile.autograd_cache_misses"  # int
COMPILE_CPP_BUILDS = "vllm.compile.cpp_builds"  # int: C++ compiler runs for generated kernels (CPU)
COMPILE_AOT_LOADED = "vllm.compile.aot_loaded"  # bool: AOT artifact loaded (no Dynamo run)
COMPILE_AOT_LOAD_ERROR = "vllm.compile.aot_load_error"  # str: why an existing AOT artifact was not used
COMPILE_AOT_BYTES = "vllm.compile.aot_artifact_bytes"  # int By: size of the AOT artifact loaded or saved
COMPILE_UNIQUE_GRAPHS = "vllm.compile.unique_graphs"  # int: Dynamo graphs captured
COMPILE_CACHE_DIR = "vllm.compile.cache_dir"  # str
COMPILE_REGION = "vllm.compile.region"  # str: PyTorch's dynamo_timed region (the span's name)
COMPILE_ID = "vllm.compile.id"  # str: PyTorch's compile id (frame/attempt, e.g. "0/0")
COMPILE_REGION_EXCEPTION = "vllm.compile.region_exception"  # str: exception type that left the region

KV_CACHE_BYTES = "vllm.kv_cache.bytes"  # int By: memory given to the KV cache
KV_CACHE_BLOCKS = "vllm.kv_cache.blocks"  # int
CUDAGRAPH_COUNT = "vllm.cudagraph.count"  # int: CUDA graphs captured
CUDAGRAPH_CAPTURE_SIZES = "vllm.cudagraph.capture_sizes"  # int: batch sizes configured for capture
CUDAGRAPH_MEMORY = "vllm.cudagraph.memory_bytes"  # int By: GPU memory the captured graphs took (vLLM's figure)
CUDAGRAPH_MODE = "vllm.cudagraph.mode"  # str: the runtime mode captured (FULL, PIECEWISE) or configured
CUDAGRAPH_SHAPES = "vllm.cudagraph.shapes"  # int: batch shapes captured (in this mode)
CUDAGRAPH_SHAPES_FULL = "vllm.cudagraph.shapes.full"  # int: batch shapes captured as FULL graphs
CUDAGRAPH_SHAPES_PIECEWISE = "vllm.cudagraph.shapes.piecewise"  # int: batch shapes captured piecewise

# --- a start in progress (agent/live/progress.py): on the "Startup in progress" span, the status endpoint, the live
# series
LIVE_PHASE = "vllm.startup.live.phase"  # str: the innermost open phase of this process
LIVE_PHASE_STACK = "vllm.startup.live.phase_stack"  # str[]: the open phases, outermost first
LIVE_ELAPSED_S = "vllm.startup.live.elapsed_s"  # float s: since this process was created
LIVE_PHASE_ELAPSED_S = "vllm.startup.live.phase_elapsed_s"  # float s: since the innermost open phase began
LIVE_REMAINING_S = "vllm.startup.live.remaining_s"  # float s: expected time to ready (history; API server)
LIVE_HISTORY = "vllm.startup.live.history"  # int: recorded starts the estimate is made from (0: no estimate)

ERROR_TYPE = "error.type"  # OTel semconv
COMMAND_ARGS = "process.command_args"  # str[] on process spans: argv with secrets redacted
TRACE_ID = "trace_id"  # metric label on vllm.startup.last_start.duration: the start's trace

# --- per-phase resource summary, on every startup span (sampler.py) --------------------------------
RES_CPU_TIME = "vllm.startup.resource.cpu_time"  # float s: CPU time of this process during the span
RES_CORES_AVG = "vllm.startup.resource.cores_avg"  # float: cpu_time / duration (cores kept busy)
RES_CORES_PEAK = "vllm.startup.resource.cores_peak"  # float: peak cores this process used (one sampling interval)
RES_RSS_PEAK = "vllm.startup.resource.rss_peak"  # int By: peak resident memory of this process
RES_DISK_READ = "vllm.startup.resource.disk_read"  # int By: bytes this process read from storage
RES_DISK_READ_GBPS = "vllm.startup.resource.disk_read_gb_per_s"  # float GB/s: disk_read / duration
RES_GPU_MEMORY_DELTA = "vllm.startup.resource.gpu_memory_delta"  # int By: GPU memory this process holds, end - start
RES_GPU_MEMORY_SOURCE = "vllm.startup.resource.gpu_memory_source"  # str: nvml_process | torch_reserved
RES_CHILDREN_CPU_TIME = "vllm.startup.resource.children_cpu_time"  # float s: CPU of subprocesses reaped in the span
RES_CHILDREN_CORES_AVG = "vllm.startup.resource.children_cores_avg"  # float: children_cpu_time / duration
RES_CHILDREN_RSS_PEAK = "vllm.startup.resource.children_rss_peak"  # int By: largest reaped subprocess's peak RSS
RES_SAMPLES = "vllm.startup.resource.samples"  # int: sampler ticks inside the span
# root only: the whole process tree and the host
RES_TREE_CPU_TIME = "vllm.startup.resource.tree_cpu_time"  # float s: API server + all descendants
RES_SYSTEM_CORES_BUSY_PEAK = "vllm.startup.resource.system_cores_busy_peak"  # int: logical cores > 50 % busy
RES_CGROUP_THROTTLED = "vllm.startup.resource.cgroup_throttled_time"  # float s: cgroup CPU throttling

# --- phase ids (closed list; docs/telemetry.md) ----------------------------------------------------
PHASES: dict[str, str] = {
    "startup": "whole start, API-server process creation to HTTP accepting (root)",
    "engine_core_process": "EngineCore process, creation to READY sent",
    "worker_process": "worker process, creation to its last startup RPC",
    "api_server_process": "one of several API server processes, creation to HTTP accepting (its launcher is the "
                          "root)",
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
    "model_inspection_cache_save": "model info written to the modelinfo cache (cache miss; imports the loaders)",
    "async_llm_init": "AsyncLLM construction (in a program of the user's: its start's end)",
    "llm_init": "vllm.LLM construction in a program of the user's (its start's end)",
    "tokenizer": "tokenizer / renderer init",
    "engine_client": "engine-core client (Overall Loading)",
    "engine_client_init": "AsyncMPClient / MPClient init",
    "engine_spawn": "EngineCore process start",
    "engine_wait": "waiting for EngineCore READY (handshake)",
    "api_server_spawn": "API server processes start (--api-server-count > 1, data parallel)",
    "dp_coordinator_start": "data parallel: vLLM's DP coordinator process started and its sockets reported (its "
                            "interpreter start and imports)",
    "api_server_wait": "the launcher waiting for every API server process to accept HTTP",
    "engine_connect": "engine-core client sockets after READY until each EngineCore's first input message "
                      "(vLLM < 0.17 binds them only then: ZMQ's reconnect interval)",
    "engine_core_init": "EngineCoreProc init (handshake + engine init)",
    "worker_handshake": "the executor connecting its workers' message queues after their READY (shared memory, ZMQ "
                        "handshakes), until its first RPC can go out",
    "cpu_topology": "CPU: the CPU topology for the OpenMP thread binding, read from an `lscpu` subprocess",
    "omp_binding": "CPU: vLLM's OpenMP thread binding (its C++ `init_cpu_threads_env`), from the topology read to the "
                   "distributed init",
    "message_queue_init": "a worker creating its side of the executor's message queues (after its model is loaded)",
    "engine_init": "EngineCore init",
    "frontend_handshake": "the EngineCore waiting for its front end's init message (HELLO sent, addresses received)",
    "dp_group_init": "data parallel: the EngineCore's DP process group, a rendezvous with every other rank",
    "executor_init": "executor init",
    "structured_output_init": "structured-output manager init (thread pools, the EngineCore's tokenizer)",
    "scheduler_init": "scheduler init (KV-cache manager, block pool)",
    "worker_spawn": "worker process start",
    "worker_wait": "waiting for workers READY",
    "worker_init": "worker init",
    "kernel_overrides": "the platform's replacements for vLLM's Triton kernels, registered at worker init (CPU "
                        "without Triton-CPU: C++ fallbacks)",
    "device_init": "device and distributed init",
    "cuda_init": "the process's first CUDA call: driver load and CUDA context creation",
    "distributed_init": "torch.distributed and vLLM's parallel groups (NCCL / gloo)",
    "process_group_init": "torch.distributed world process group",
    "model_parallel_init": "tensor / pipeline / data-parallel groups",
    "model_runner_init": "model runner construction (buffers, attention backends)",
    "model_load": "model load (runner)",
    "model_loader": "model load (loader)",
    "model_state_init": "model state init after the weights (V2 runner)",
    "sampler_init": "sampler construction (V2 runner; may import FlashInfer)",
    "model_create": "model creation: module construction plus inspection logging (vLLM's 'Initializing model took')",
    "model_init": "model module construction",
    "weights_load": "weights load (includes a lazy download)",
    "weights_download": "weights download from the hub",
    "weights_postprocess": "weight post-processing into kernel formats",
    "kv_cache_init": "KV-cache profiling, allocation and warm-up (Prepare model)",
    "kv_cache_profile": "KV-cache memory profiling",
    "profile_run": "profile run: a max-size dummy forward (the first forward: torch.compile runs inside it)",
    "compiled_first_run": "first run of the compiled model (loads the compiled kernels)",
    "sampler_warmup": "dummy sampler run (the sampler's first kernels)",
    "cudagraph_memory_profile": "CUDA-graph memory estimate (a few graphs captured and freed; V1 runner)",
    "kv_cache_allocate": "KV-cache allocation",
    "warmup": "compile or warm up model",
    "compile_warmup": "warm-up run that triggers torch.compile",
    "torch_compile": "torch.compile (Dynamo + backend)",
    "torch_compile_stage": "one of PyTorch's own compile regions (dynamo_timed): Dynamo tracing, AOTAutograd, "
                           "Inductor passes / codegen / compile, FX-graph cache; the span is named as PyTorch names it",
    "aot_load": "load of a saved AOT-compiled artifact (a failure means compile again)",
    "aot_save": "AOT-compiled artifact serialised and written to the cache (a cold compile's last step)",
    "kernel_warmup": "kernel warm-up (DeepGemm, CuTeDSL, ...)",
    "kernel_autotune": "FlashInfer kernel autotuning (a max-size dummy run, SM90+)",
    "jit_warmup": "Triton kernel JIT warm-up: a prefill and a decode step (V2 runner)",
    "inductor_lazy_init": "Inductor's deferred initialisation (warm starts)",
    "dynamo_transform": "Dynamo bytecode transform",
    "inductor_compile": "Inductor compilation",
    "compile_graph": "compile one graph (cache load or compile)",
    "cudagraph_capture": "CUDA-graph capture",
    "cudagraph_capture_mode": "CUDA-graph capture of one runtime mode (FULL or PIECEWISE; V1 runner)",
    "gc": "a Python garbage collection of at least 10 ms (gc.collect() or automatic): inside a phase, or under the "
          "process span where no phase span was current (between phases, or triggered by another thread)",
    "module_import": "a module import of at least 20 ms inside a phase (lazy imports: runners, kernels, loaders)",
    "app_build": "FastAPI app build",
    "app_state": "app state init",
    "http_server_setup": "vLLM's serve_http after the app state until uvicorn's server task runs (route listing, "
                         "uvicorn's config load)",
    "http_startup": "uvicorn startup: lifespan and listen",
}


# Detail phases refine the phase they run in rather than structure it (PyTorch's compile regions, garbage
# collections, module imports): in the explained-share accounting they cover their own time and never turn
# the span they run in into a parent (docs/telemetry.md, "Explained share").
DETAIL_PHASES = frozenset({"torch_compile_stage", "gc", "module_import"})
# phases whose spans come tens to a second (a graph loaded from the compile cache each, in a warm
# start): their end starts no export of its own (each export holds the GIL for milliseconds beside the loading
# thread); the enclosing phase's end, or the batch processor's half-second tick, takes them along
BURST_PHASES = frozenset({"compile_graph"})

# Waiting phases whose wait is on another process than a child it spawned: on its front end (the EngineCore waiting
# for the init message of the launcher, or of an API server process that does the handshake: vLLM 0.26 with several
# API servers), or on its peers (a data-parallel rank waiting for the others at the DP group's rendezvous). On the
# critical path, the work of the processes waited on explains the instant.
# Phases that only wait for another process (the patch table's waiting rows and the launcher's wait on its API
# servers; tests/unit/behaviour/test_vocabulary_contract.py checks them against the table): stuck-in-phase alerts
# leave them out.
WAITING_PHASES = frozenset({"api_server_wait", "dp_group_init", "engine_wait", "frontend_handshake", "worker_wait"})
WAITS_ON_FRONT_END = frozenset({"frontend_handshake"})
WAITS_ON_PEERS = frozenset({"dp_group_init"})


# Phases with a metric (vllm.startup.phase.last_duration, the in-progress phase): what a fleet compares — the
# stacked breakdown's leaf-level phases, each process's whole phase and the phases alerts budget. The nested detail
# (compile stages, loader steps, ...) stays in the trace: at ~65 phases a compiled start would cost its store more
# than 100 series (docs/results.md "Fleet scale").
METRIC_PHASES: frozenset[str] = frozenset(phase_groups.STACKED_GROUPS["stacked"]) | {
    "startup", "engine_core_process", "worker_process", "api_server_process", "model_inspection", "weights_download",
    "kv_cache_profile"}



# --- metrics (docs/metrics.md) -----------------------------------------------------------------------
# Labels every startup metric carries: low-cardinality, what a fleet is compared by. Pod / host identity
# rides on resource attributes (OTLP) or on the scrape target (Prometheus).
FLEET_LABELS: tuple[str, ...] = (
    MODEL, VLLM_VERSION, DEVICE, DEVICE_MODEL, TP_SIZE, PP_SIZE, DP_SIZE, MODE, COMPILATION_MODE,
)
CPU_MODE = "cpu.mode"  # user | system (OTel semconv)
DISK_IO_DIRECTION = "disk.io.direction"  # read | write (OTel semconv)
NETWORK_IO_DIRECTION = "network.io.direction"  # receive | transmit (OTel semconv; hw.gpu.io = PCIe)
CPU_SCOPE = "vllm.startup.cpu.scope"  # process | tree | system
HW_ID, HW_NAME, HW_VENDOR, HW_TYPE, HW_GPU_TASK = "hw.id", "hw.name", "hw.vendor", "hw.type", "hw.gpu.task"

# Histogram buckets (s), 50 ms to 30 min: the spanmetrics overlay's (deploy/kubernetes/overlays/spanmetrics), which
# derives per-span histograms in a collector; the agent's own startup metrics have no histogram (one series per fact).
DURATION_BUCKETS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800,
)

# name -> (instrument, unit, labels, description)
# Startup metrics: recorded once per start at each process's ready point, from its startup spans; they
# carry FLEET_LABELS besides the labels listed. Served over OTLP and on vLLM's own GET /metrics. One series per
# fact and start, no histogram buckets: fleet distributions are counted by the recording rules
# (dashboards/recording.py), so a start costs its store tens of series, not a thousand (docs/results.md).
STARTUP_METRICS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "vllm.startup.phase.last_duration": (
        "gauge", "s", (PHASE, PROCESS_KIND),
        "this start's time in each phase of METRIC_PHASES: the phase's spans in one process added up (one series "
        "per phase, process kind and start; on /metrics, which serves the whole start, the slowest process of the "
        "kind)"),
    "vllm.startup.starts": ("counter", "{start}", (OUTCOME,), "starts, by outcome (ready, failed or exited)"),
    "vllm.startup.compiles": ("counter", "{compile}", (COMPILE_CACHE_HIT,),
                              "torch.compile runs at startup, by compile-cache hit (true or false); a loaded AOT "
                              "artifact (vLLM >= 0.17's warm start, no torch.compile) counts as a hit"),
    "vllm.startup.compile_keys": ("counter", "{compile}", (COMPILE_CACHE_KEY,),
                                  "torch.compile runs (and loaded AOT artifacts) by the compile-cache key they used "
                                  "(fleet labels but vllm.startup.mode: one series per key); distinct keys per model "
                                  "and version = "
                                  "compile-cache fragmentation"),
    "vllm.startup.weights.bytes": ("counter", "By", (WEIGHTS_SOURCE,), "weight bytes loaded, by source"),
    "vllm.startup.weights.load_time": ("counter", "s", (WEIGHTS_SOURCE,),
                                       "time spent in Load weights, by source (bytes / time = GB/s)"),
    "vllm.startup.cudagraphs": ("counter", "{graph}", (), "CUDA graphs captured at startup"),
    "vllm.startup.rank_wait": ("gauge", "s", (PHASE,),
                               "several workers per EngineCore (tensor / pipeline parallel): how long after the first "
                               "rank the last one ended a leaf phase, the time the others waited for that straggler; "
                               "at a barrier every rank leaves together (process_group_init, model_parallel_init): how "
                               "much later the last rank arrived (the start's 5 longest waits of at least 0.05 s, one "
                               "series per phase)"),
    "vllm.startup.last_start.duration": (
        "gauge", "s", (OUTCOME, TRACE_ID, COMPILE_CACHE_HIT, MODEL_INSPECTION_CACHE_HIT, WEIGHTS_SOURCE),
        "the last start's duration with its trace id and causes (one series per start)"),
}
# Resource fingerprint: sampled from process start until shortly after ready, then stopped (OTLP only).
RESOURCE_METRICS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "process.cpu.time": ("counter", "s", (CPU_MODE,), "CPU time of this process (OTel semconv)"),
    "process.memory.usage": ("updowncounter", "By", (), "resident memory of this process (OTel semconv)"),
    "process.disk.io": ("counter", "By", (DISK_IO_DIRECTION,), "storage bytes read / written (OTel semconv)"),
    "vllm.startup.cpu.cores": ("gauge", "{core}", (CPU_SCOPE,),
                               "peak cores busy since the last export: this process, the process tree "
                               "(API server) or host cores > 50 % busy (API server)"),
    "vllm.startup.cgroup.cpu.throttled_time": ("counter", "s", (), "cgroup CPU throttling (API server)"),
    "hw.gpu.memory.usage": ("updowncounter", "By", (HW_ID, HW_NAME, HW_VENDOR), "GPU memory used (OTel semconv)"),
    "hw.gpu.memory.limit": ("updowncounter", "By", (HW_ID, HW_NAME, HW_VENDOR), "GPU memory size (OTel semconv)"),
    "hw.gpu.utilization": ("gauge", "1", (HW_ID, HW_NAME, HW_VENDOR, HW_GPU_TASK), "GPU busy ratio (OTel semconv)"),
    "hw.gpu.io": ("counter", "By", (HW_ID, HW_NAME, HW_VENDOR, NETWORK_IO_DIRECTION), "PCIe traffic (OTel semconv)"),
    "hw.power": ("gauge", "W", (HW_ID, HW_NAME, HW_VENDOR, HW_TYPE), "GPU power draw (OTel semconv, hw.type=gpu)"),
}
# A start in progress: reported by each process from its start until its ready point (then absent), with the
# fleet labels; the trace id tells a start still running from a finished one (vllm.startup.last_start.duration).
LIVE_METRICS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "vllm.startup.in_progress.elapsed": ("gauge", "s", (PROCESS_KIND, TRACE_ID),
                                         "seconds since this process was created, while it starts"),
    "vllm.startup.in_progress.phase_elapsed": ("gauge", "s", (PROCESS_KIND, PHASE, TRACE_ID),
                                               "seconds this process has been in its innermost open phase with a "
                                               "metric (METRIC_PHASES; a waiting phase as it is): a new series per "
                                               "phase, the only in-progress gauge labelled with it"),
    "vllm.startup.in_progress.remaining": ("gauge", "s", (TRACE_ID,),
                                           "API server: expected seconds to ready from this node's recorded starts "
                                           "of the same model and configuration (absent without such history)"),
}
METRICS = {**STARTUP_METRICS, **RESOURCE_METRICS, **LIVE_METRICS}

_UNITS = {"s": "seconds", "By": "bytes", "W": "watts", "1": "ratio"}


def prom_name(name: str) -> str:
    """Prometheus name of a metric (OpenTelemetry's OTLP-to-Prometheus rules, as VictoriaMetrics applies
    them with -opentelemetry.usePrometheusNaming): dots to underscores, unit suffix, _total on counters."""
    kind, unit = METRICS[name][0], METRICS[name][1]
    out = name.replace(".", "_")
    suffix = _UNITS.get(unit, "")
    if suffix == "ratio" and kind != "gauge":
        suffix = ""
    if suffix and not out.endswith("_" + suffix):
        out += "_" + suffix
    if kind == "counter":
        out += "_total"
    return out


def prom_label(name: str) -> str:
    return name.replace(".", "_")
