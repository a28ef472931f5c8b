"""A program of the user's that starts vLLM's engine in its own process, as scripts and RL / evaluation frameworks do
(support/harness.py ``run_engine_script``): ``python engine_script.py llm|async_llm MODEL HOLD_S [COUNT]``. Prints
``READY <unix ns>`` once the engine is built, keeps it ``HOLD_S`` seconds, then shuts it down; ``COUNT`` (``llm``
only, default 1): builds one engine after another that many times (a sweep, a retry), then exits 0."""

from __future__ import annotations

import gc
import sys
import time


def main(mode: str, model: str, hold_s: float, count: int = 1) -> None:
    kwargs = dict(model=model, enforce_eager=True, max_model_len=256, dtype="float32")
    if mode == "llm":
        from vllm import LLM

        for _ in range(count):
            llm = LLM(**kwargs)
            print(f"READY {time.time_ns()}", flush=True)
            time.sleep(hold_s)
            llm.llm_engine.engine_core.shutdown()  # its EngineCore process goes before the next is built
            del llm
            gc.collect()
    elif mode == "async_llm":
        import asyncio

        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        async def run() -> None:
            engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))
            print(f"READY {time.time_ns()}", flush=True)
            await asyncio.sleep(hold_s)
            engine.shutdown()

        asyncio.run(run())
    else:
        raise SystemExit(f"unknown mode {mode!r}: llm or async_llm")


if __name__ == "__main__":  # vLLM's spawned EngineCore imports this module again: nothing may run then
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 1)
