#!/usr/bin/env python3
"""Writes test/models/genai-*/: random-weight LLaMA, Qwen2, Phi-3 and Qwen3
models as ONNX Runtime GenAI's model builder writes them for the CPU.

Each Hugging Face model (2 layers, width 64, 4 heads, 2 key/value heads,
vocabulary 97) is made with random weights (seed 0) and saved with a
word-level tokenizer built offline by the `tokenizers` package (the builder
wants one); then `python -m onnxruntime_genai.models.builder -p fp32|int4
-e cpu` writes model.onnx and model.onnx.data: GroupQueryAttention (Q, K, V
packed, rotary inside), SkipSimplifiedLayerNormalization,
SimplifiedLayerNormalization, and for int4 MatMulNBits (accuracy_level 4).
genai-{llama,qwen2,phi3}-{fp32,int4}; genai-qwen3-fp32 (Q and K normalised
per head before the rotary embedding); genai-llama-tied-int4 (the input
embedding tied to the output projection, `shared_embeddings` with Gather
quantized too: the embedding is read from the int4 output weight with
GatherBlockQuantized).

Needs torch, transformers 5, tokenizers and onnxruntime-genai (0.18.0 was
used); run with the Python that has them:
  /path/to/python scripts/export_genai.py [--out DIR]   (default: test/models)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "test", "models")


# (name, Hugging Face model kind, tied embeddings, precision, extra options)
VARIANTS = [(f"{kind}-{precision}", kind, False, precision, [])
            for kind in ["llama", "qwen2", "phi3"]
            for precision in ["fp32", "int4"]] + [
    ("qwen3-fp32", "qwen3", False, "fp32", []),
    ("llama-tied-int4", "llama", True, "int4",
     ["--extra_options", "shared_embeddings=true",
      "op_types_to_quantize=MatMul/Gather"]),
]


# The test models' size; bench/bench_genai_int4.py passes a larger one.
TEST_SIZE = dict(vocab_size=97, hidden_size=64, intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128)


def save_hf_model(kind, folder, tied, size=TEST_SIZE):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    torch.manual_seed(0)
    common = dict(size, tie_word_embeddings=tied)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(
            transformers.LlamaConfig(**common))
    elif kind == "qwen2":
        model = transformers.Qwen2ForCausalLM(
            transformers.Qwen2Config(**common))
    elif kind == "qwen3":
        model = transformers.Qwen3ForCausalLM(
            transformers.Qwen3Config(**common, head_dim=16))
    else:
        model = transformers.Phi3ForCausalLM(transformers.Phi3Config(
            **common, pad_token_id=0, original_max_position_embeddings=128))
    model.eval().save_pretrained(folder)
    vocab = {f"t{i}": i for i in range(common["vocab_size"])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="t0", bos_token="t1",
        eos_token="t2", pad_token="t0").save_pretrained(folder)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=MODELS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for name, kind, tied, precision, extra in VARIANTS:
            hf = os.path.join(work, f"{kind}-tied" if tied else kind)
            if not os.path.isdir(hf):
                save_hf_model(kind, hf, tied)
            built = os.path.join(work, name)
            subprocess.run([sys.executable, "-m",
                            "onnxruntime_genai.models.builder", "-i", hf,
                            "-o", built, "-p", precision, "-e", "cpu",
                            "-c", os.path.join(work, "cache")] + extra,
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            out = os.path.join(args.out, f"genai-{name}")
            os.makedirs(out, exist_ok=True)
            for file in ["model.onnx", "model.onnx.data"]:
                shutil.copyfile(os.path.join(built, file),
                                os.path.join(out, file))
            print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
