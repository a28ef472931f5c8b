"""Shared by the end-to-end tests and the benchmark scripts: real instrumented `vllm serve` starts, the real
backends they export to (harness.py), and the tiny model they serve (make_tiny_model.py). Not part of the
installed package; nothing in src/ imports it."""
