"""Parameters of the session's named starts that tests assert on (conftest.py builds the starts). A module of its
own: a test that imports ``conftest`` at run time gets whichever directory's conftest pytest loaded last."""

# compile-cache forensics (test_compile_key.py)
P2P_HOST = "10.42.7.19"  # a pod-IP-like value for VLLM_P2P_SIDE_CHANNEL_HOST, which vLLM 0.32 hashes
COMPILE_KEY_NS = "compile-key"

# weights from the hub and from slow storage (test_weight_sources.py, test_fleet_queries.py)
HUB_REPO = "vos-e2e/tiny-llama-padded"
HUB_RATE = 50e6  # bytes/s: the hub server's bandwidth limit (~4 s for the padded model's 206 MB)
SLOW_RATE = 25e6  # bytes/s: the throttled FUSE mount's (~8 s)
WEIGHTS_NS = "weights"  # their fleet (k8s.namespace.name): the dashboards' weight panels select it
