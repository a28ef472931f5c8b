"""vLLM's own startup spans outside any start are dropped, never exported as roots of their own.

vLLM (0.16+) opens its startup spans (``Executor init``, ``Prepare model``...) on the global tracer provider. Inside a
start they hang under the process span (the current context): adopted, phase-tagged, on the start's critical path.
Outside one (a process where no engine start of ours is open, or before its start began) such a span has no parent:
exported, it would be a trace of two to six spans with no process, imports or ready point, which a reader of the
backend takes for a start. This sampler, put on the SDK provider by our configurator, drops it at its start (no
span is made, nothing is exported): a native span name, or one opened by vLLM's ``@instrument`` (its
``code.namespace`` is a ``vllm`` module), with no sampled parent. Every other decision is the configured sampler's.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import get_current_span

CODE_NAMESPACE = "code.namespace"  # vLLM's @instrument sets it on every span it opens, at the start


def is_native_fragment(parent_context: Any, name: str, attributes: Any) -> bool:
    """A span vLLM opens with no start of ours around it: vLLM's code or name, and no sampled parent (none, or a
    fragment dropped here: its children go with it whatever the configured sampler)."""
    parent = get_current_span(parent_context).get_span_context()
    if parent.is_valid and parent.trace_flags.sampled:
        return False
    namespace = str((attributes or {}).get(CODE_NAMESPACE) or "")
    if namespace == "vllm" or namespace.startswith("vllm."):
        return True
    from vllm_otel_startup.agent.foundation.patch_points import NATIVE_SPANS  # outside a start: rare, import then

    return name in NATIVE_SPANS


class NativeFragmentFilter(Sampler):
    def __init__(self, delegate: Sampler) -> None:
        self.delegate = delegate

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:  # noqa: PLR0913
        if is_native_fragment(parent_context, name, attributes):
            return SamplingResult(Decision.DROP)
        return self.delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"VllmNativeFragmentFilter{{{self.delegate.get_description()}}}"


def install(provider: Any) -> None:
    """On an SDK provider (it has a ``sampler``), once."""
    sampler = getattr(provider, "sampler", None)
    if sampler is not None and not isinstance(sampler, NativeFragmentFilter):
        provider.sampler = NativeFragmentFilter(sampler)
