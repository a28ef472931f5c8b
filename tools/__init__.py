"""Generators of committed files, each run from the repository root as ``python -m tools.NAME``: the generated
tables of docs/telemetry.md (gen_docs), the vLLM qualname inventory (qualname_inventory), the recorded starts under
tests/data/starts (record_corpus, tempo_fixture, gpu_sink_to_otlp)."""
