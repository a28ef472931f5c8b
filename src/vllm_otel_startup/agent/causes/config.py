"""Cause probes of the engine's configuration: the facts a whole start is labelled with (ConfigFacts), the model
inspection's cache hit (ModelInspection) and the KV cache's size from the memory profile (KvCacheProfile)."""

from __future__ import annotations

import sys
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.causes.base import Call, Probe, ProbeHost, span_start_ns
from vllm_otel_startup.agent.foundation.process import scrub


def _config_facts(vllm_config: Any) -> dict[str, Any]:
    mc = getattr(vllm_config, "model_config", None)
    pc = getattr(vllm_config, "parallel_config", None)
    cc = getattr(vllm_config, "compilation_config", None)
    dc = getattr(vllm_config, "device_config", None)
    facts: dict[str, Any] = {}
    if mc is not None:
        facts[sc.MODEL] = scrub(str(getattr(mc, "model", "")))  # e.g. s3://key:secret@bucket/...
        served = getattr(mc, "served_model_name", None)
        if served:
            facts[sc.SERVED_MODEL_NAME] = scrub(str(served if isinstance(served, str) else served[0]))
        facts[sc.DTYPE] = str(getattr(mc, "dtype", "")).replace("torch.", "")
        facts[sc.ENFORCE_EAGER] = bool(getattr(mc, "enforce_eager", False))
        if getattr(mc, "max_model_len", None) is not None:
            facts[sc.MAX_MODEL_LEN] = int(mc.max_model_len)
    if pc is not None:
        facts[sc.TP_SIZE] = int(getattr(pc, "tensor_parallel_size", 1))
        facts[sc.PP_SIZE] = int(getattr(pc, "pipeline_parallel_size", 1))
        facts[sc.DP_SIZE] = int(getattr(pc, "data_parallel_size", 1))
    if cc is not None:
        mode = getattr(cc, "mode", getattr(cc, "level", None))
        if mode is not None:
            facts[sc.COMPILATION_MODE] = getattr(mode, "name", str(mode))
        sizes = getattr(cc, "cudagraph_capture_sizes", None)
        if sizes is not None:
            facts[sc.CUDAGRAPH_CAPTURE_SIZES] = len(sizes)
    if dc is not None and getattr(dc, "device_type", None):
        facts[sc.DEVICE] = str(dc.device_type)
    return facts


class ConfigFacts(Probe):
    """create_engine_config() -> VllmConfig: the facts the whole start is labelled with."""

    name = "config"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        facts = _config_facts(call.result)
        rt.facts.update(facts)
        if span is not None:
            span.set_attributes(facts)


SUBPROCESS_SPAN = "Model inspection subprocess"


class ModelInspection(Probe):
    """A cache hit is an inspection that needed no subprocess (its child span) since it began."""

    name = "model_inspection"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if span is not None and span.is_recording():
            began = span_start_ns(span) or 0
            miss = any(name == SUBPROCESS_SPAN and start >= began for start, _, name, *_ in list(rt.local))
            span.set_attribute(sc.MODEL_INSPECTION_CACHE_HIT, not miss)


class ProcessGroup(Probe):
    """init_distributed_environment(world_size, rank, init_method, local_rank, backend, ...): the communicator this
    rank's Process group init set up (NCCL on GPUs, gloo on CPUs) and the ranks it waited for."""

    name = "process_group"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if span is None:
            return
        backend, world = call.arg(4, "backend"), call.arg(0, "world_size")
        dist = sys.modules.get("torch.distributed")  # the group it joined: vLLM widens the argument across data
        if dist is not None and dist.is_available() and dist.is_initialized():  # parallel ranks (and nodes) inside
            world = dist.get_world_size()
        if isinstance(backend, str) and backend:
            span.set_attribute(sc.PARALLEL_BACKEND, backend)
        if isinstance(world, int) and not isinstance(world, bool) and world > 0:
            span.set_attribute(sc.PARALLEL_WORLD_SIZE, world)


class KvCacheProfile(Probe):
    name = "kv_cache_profile"

    def after_call(self, rt: ProbeHost, span: Any, call: Call) -> None:
        if span is not None and isinstance(call.result, int):
            span.set_attribute(sc.KV_CACHE_BYTES, call.result)
