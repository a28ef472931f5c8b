"""The process kinds: the one place their names are spelled (span attribute values, the spawn environment)."""

from __future__ import annotations

API_SERVER, ENGINE_CORE, WORKER, HELPER, OTHER = "api_server", "engine_core", "worker", "helper", "other"
# a ready row's ``ends`` for the engine started in the user's own process (vllm.LLM(...), AsyncLLM in a script): that
# process plays the API server's part (the front end and the EngineCore client) and is the start's root
EMBEDDED = "embedded"
ANY = "any"  # a patch row of every process kind
# the kinds with a process span of their own, in the order a start makes them
TRACED = (API_SERVER, ENGINE_CORE, WORKER)
