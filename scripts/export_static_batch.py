#!/usr/bin/env python3
"""Exports models whose ONNX graph fixes the batch, for microbatch tests.

Most exports fix the batch: PyTorch's dynamo exporter does unless given
dynamic shapes, and so does the TorchScript exporter without dynamic axes;
their Reshape targets and Expand shapes then name the batch. These are the
models of test/models/static-*.onnx, each exported both ways, at a batch
of 4 (so that 2 and 4 microbatches cut it) and 16 tokens:

- static-gpt2-*: the transformers library's GPT-2 (export_hf_models.py's
  sizes: 2 layers of width 64, 4 heads, vocabulary 97);
- static-llama-*: its LLaMA (grouped-query attention, 4 heads and 2
  key/value heads);
- static-bart-*: its BART as an encoder-decoder (input_ids of 16 tokens
  for the encoder, decoder_input_ids of 8 for the decoder, logits out);
- static-t5-ts: its T5, an encoder-decoder whose relative position bias is
  computed once for the whole batch (TorchScript only: the dynamo exporter
  of torch 2.15 fails on T5's attention, viewing a transposed tensor).

`-dynamo` files are written by torch.onnx.export(dynamo=True), `-ts` files
by the TorchScript exporter (dynamo=False, no dynamic axes) with
transformers 4.x (5.x's mask code does not trace). Random weights
(export_hf_models.randomize), one seed per model, so that both exports of a
model hold the same weights.

Needs torch and onnxscript, and transformers 5.x for --exporter dynamo,
4.x for --exporter ts (written with torch 2.15.0, transformers 5.25.0 and
4.46.3); not in the README's test command: the models are committed.
Usage: export_static_batch.py OUT_DIR --exporter dynamo|ts
"""
import argparse
import os

import export_hf_models as hf

BATCH, SEQ, DECODER_SEQ = 4, 16, 8


def build(name, transformers, torch):
    """(model, example inputs, input names) of one model."""
    ids = torch.randint(0, hf.VOCAB, (BATCH, SEQ))
    if name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=hf.VOCAB, n_embd=64, n_layer=2, n_head=4,
            n_positions=128, use_cache=False)
        return transformers.GPT2LMHeadModel(config), (ids,), ["input_ids"]
    if name == "llama":
        config = transformers.LlamaConfig(**hf.SIZES, num_key_value_heads=2)
        return transformers.LlamaForCausalLM(config), (ids,), ["input_ids"]
    if name == "t5":
        config = transformers.T5Config(
            vocab_size=hf.VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
            num_decoder_layers=2, num_heads=4, use_cache=False,
            decoder_start_token_id=0)
        decoder_ids = torch.randint(0, hf.VOCAB, (BATCH, DECODER_SEQ))
        return (transformers.T5ForConditionalGeneration(config),
                (ids, decoder_ids), ["input_ids", "decoder_input_ids"])
    if name == "bart":
        config = transformers.BartConfig(
            vocab_size=hf.VOCAB, d_model=64, encoder_layers=2,
            decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128,
            decoder_ffn_dim=128, max_position_embeddings=128, use_cache=False)
        decoder_ids = torch.randint(0, hf.VOCAB, (BATCH, DECODER_SEQ))
        return (transformers.BartForConditionalGeneration(config),
                (ids, decoder_ids), ["input_ids", "decoder_input_ids"])
    raise ValueError(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--exporter", choices=("dynamo", "ts"), required=True)
    args = parser.parse_args()
    import torch
    import transformers
    os.makedirs(args.out_dir, exist_ok=True)
    exporter = args.exporter
    kwargs = dict(dynamo=True, external_data=False) if exporter == "dynamo" \
        else dict(dynamo=False, do_constant_folding=True)
    for seed, name in enumerate(("gpt2", "llama", "bart", "t5")):
        if name == "t5" and exporter == "dynamo":
            continue
        torch.manual_seed(seed)
        model, inputs, names = build(name, transformers, torch)
        model.eval()
        hf.randomize(model, torch)
        path = os.path.join(args.out_dir, f"static-{name}-{exporter}.onnx")
        torch.onnx.export(hf.by_name(model, names, torch), inputs, path,
                          input_names=names, output_names=["logits"],
                          opset_version=18, **kwargs)
        print(f"wrote {path}")

if __name__ == "__main__":
    main()
