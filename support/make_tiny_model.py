"""Builds a tiny random-weight Llama model with a byte-level BPE tokenizer, fully offline.

By default hidden 128, 2 layers, 4 heads / 2 KV heads, head_dim 32 (a size vLLM's CPU attention
supports), max positions 256; float32 safetensors (~1.7 MB). Larger variants (for the start corpus):
    python make_tiny_model.py OUT_DIR [--layers N] [--hidden H]    (heads = H / 32, KV heads = heads / 2)
``--vocab V`` pads the embedding and LM head to V rows (the tokenizer keeps its 512 tokens): bytes to download
or read at a measurable pace (200000 rows: ~205 MB) without more compute per token.
"""

from __future__ import annotations

from pathlib import Path

TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "vLLM serves large language models fast.",
    "OpenTelemetry traces explain where the time goes.",
    "Startup: imports, config, weights, compile, KV cache, warm-up, HTTP.",
] * 20


def build(out: Path, layers: int = 2, hidden: int = 128, vocab: int | None = None) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXT, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=max(len(fast), vocab or 0), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 32, num_key_value_heads=max(1, hidden // 64), head_dim=32,
        max_position_embeddings=256,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        torch_dtype="float32", tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="tiny-model")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=None)
    a = ap.parse_args()
    print(build(Path(a.out), a.layers, a.hidden, a.vocab))
