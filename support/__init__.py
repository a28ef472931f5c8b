"""The test bench, shared by the tests, the benchmarks (benchmarks/) and the corpus recorder (tools/): real
instrumented `vllm serve` starts (harness.py), the real backends they export to (backends.py), loopback helpers
(net.py) and the tiny model they serve (make_tiny_model.py). Not part of the installed package; nothing in src/
imports it."""
