"""Serializes a model for the tensorizer and sharded_state loaders with vLLM's own helpers (one vLLM engine,
two worker RPCs: save_tensorized_model, save_sharded_state), each into a model directory of its own (the
model's config and tokenizer files, no other weights), as vLLM's examples do.

    python loader_artifacts.py MODEL_DIR OUT_DIR    ->  OUT_DIR/tensorizer/model.tensors,
                                                        OUT_DIR/sharded/model-rank-0-part-0.safetensors
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def main(model: Path, out: Path) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine and worker in this process (the patch below)
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import tensorizer
    from vllm.model_executor.model_loader.tensorizer import TensorizerConfig
    from vllm.v1.engine.llm_engine import LLMEngine

    # After writing model.tensors, vLLM's serializer snapshot-downloads the model's config files from the hub by
    # served model name (a local path is no repo id, and no hub is reachable here): they are copied below instead.
    tensorizer.serialize_extra_artifacts = lambda *args, **kwargs: None

    dirs = {name: out / name for name in ("tensorizer", "sharded")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
        for f in model.iterdir():  # config + tokenizer, not the weights
            if f.is_file() and not f.name.endswith((".safetensors", ".bin", ".pt")):
                shutil.copy2(f, d / f.name)
    args = EngineArgs(model=str(model), enforce_eager=True, dtype="float32", max_model_len=256,
                      distributed_executor_backend="uni")
    engine = LLMEngine.from_vllm_config(args.create_engine_config())
    try:
        engine.engine_core.save_sharded_state(path=str(dirs["sharded"]))
        # second: serialize_vllm_model registers a meta-device marker parameter on the live model, which a
        # later save_sharded_state could not copy ("Cannot copy out of meta tensor")
        tc = TensorizerConfig(tensorizer_dir=str(dirs["tensorizer"]))
        engine.collective_rpc("save_tensorized_model", kwargs={"tensorizer_config": tc.to_serializable()})
    finally:
        engine.engine_core.shutdown()
    for d in dirs.values():
        print(d, sorted(p.name for p in d.iterdir()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
