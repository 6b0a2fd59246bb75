#!/usr/bin/env python3
"""Exports small Hugging Face transformers models to ONNX, as users export them.

The models of test/models/hf-*.onnx: the transformers library's own GPT-2,
LLaMA (grouped-query attention: 4 heads, 2 key/value heads), Qwen2 (LLaMA's
shape with biases on Q, K and V), Qwen3 (no biases, but an RMS norm of Q and
K per head before the rotary embedding), Phi (Phi-1.5's shape: rotary
embedding of half of each head, attention and MLP in parallel), Gemma
(multi-query attention: one key/value head), GPT-J (interleaved rotary
embedding of part of each head, its table gathered with GatherElements),
Falcon (multi-query attention fused into one projection, K and V picked out
with GatherND), Phi-3 (Q, K and V fused into one projection of unequal
parts: 4 query heads, 2 key/value heads), BERT (with attention_mask and
token_type_ids inputs), RoBERTa (positions counted past padding tokens with
CumSum), ViT (a Conv cuts 32 x 32 images into 8 x 8 patches), CLIP's text
encoder (pooled at the token ArgMax finds) and GPT-NeoX (rotary embedding of
a quarter of each head, concatenated with the three quarters passed
through), each 2 layers of width 64, built
from a config with random weights (no download), and exported by PyTorch's
current exporter (torch.onnx.export with dynamo=True, opset 18) on static
shapes, batch 2 x 16 tokens. Attention is PyTorch's
scaled_dot_product_attention, the library's default, which the exporter
writes as MatMul and Softmax with Q and K each scaled by the fourth root of
the head size and a guard that zeroes rows of NaN (IsNaN, Where).

LLaMA is also exported at opset 23 (hf-llama-attention.onnx), where the
exporter writes attention as ONNX's own Attention operator.

LLaMA, Gemma and Falcon are also exported as one decoding step with a
key/value cache (hf-llama-decode.onnx, hf-gemma-decode.onnx,
hf-falcon-decode.onnx), as a step is exported
for serving: input_ids of one new token a sequence and past.<layer>.key and
.value (8 cached tokens) in; logits and present.<layer>.key and .value (the
cache with the new token's keys and values appended) out.

LLaMA is also exported as most ONNX files on the Hub were written: by
Optimum's path, PyTorch's older TorchScript exporter (dynamo=False) with
dynamic batch and sequence axes, input_ids and an attention_mask, and
transformers 4.x (hf-llama-torchscript.onnx, `--torchscript`, with
transformers 4.46.3: 5.x's mask code does not trace). Its causal mask is
built from shapes (Shape, Gather, Range, Expand) and written with ScatterND.
So is its decoding step as Optimum's decoder with past
(hf-llama-torchscript-past.onnx): one new token, the attention mask over
the cached and new tokens, past_key_values.<layer>.key and .value in and
present.<layer>.key and .value out (transformers 4.x's cache of tuples).
And with a static cache (hf-llama-static-cache.onnx), as an ahead-of-time
compiler serves one: the cache has a fixed length (CACHE_LENGTH) and the new
tokens, however many, are written into it at `cache_position` (in place,
which the exporter writes as ScatterElements at run-time indices); the
attention mask covers the whole cache. One program serves the prompt and
every step. hf-llama-static-step.onnx is such a step (one new token) as
the dynamo exporter writes it with transformers 5.x, whose cache is
written where its count of tokens seen says (the first position given),
with ScatterND.

Every parameter is drawn at random (norm weights around 1): left at their
initial zeros, the biases would all be one value, which the exporter stores
as one shared initializer, unlike a trained model's.

Needs torch, transformers and onnxscript (not in the README's test command;
the models are committed). Usage: export_hf_models.py OUT_DIR [--torchscript]
"""
import argparse
import inspect
import os

BATCH, SEQ, VOCAB = 2, 16, 97
SIZES = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
             num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=128, use_cache=False)


# The committed models, in the order they are exported (each draws from one
# random stream: a new one goes last, so that the others stay the same):
# (name for build(), opset, file name suffix).
EXPORTS = (("gpt2", 18, ""), ("llama", 18, ""), ("qwen2", 18, ""),
           ("bert", 18, ""), ("roberta", 18, ""), ("llama", 23, "-attention"),
           ("qwen3", 18, ""), ("phi", 18, ""), ("gemma", 18, ""),
           ("gptj", 18, ""), ("falcon", 18, ""), ("vit", 18, ""),
           ("clip", 18, ""), ("phi3", 18, ""), ("gpt-neox", 18, ""),
           ("llama-decode", 18, ""), ("gemma-decode", 18, ""),
           ("falcon-decode", 18, ""), ("llama-static-step", 18, ""))
# Written by the TorchScript exporter (--torchscript), in their own random
# stream: (name for build(), opset, file name).
TORCHSCRIPT_EXPORTS = (("llama-masked", 18, "hf-llama-torchscript.onnx"),
                       ("llama-past", 18, "hf-llama-torchscript-past.onnx"),
                       ("llama-static", 18, "hf-llama-static-cache.onnx"),
                       ("bert", 14, "hf-bert-torchscript.onnx"))
# Decoding steps (-decode): one new token a sequence after PAST cached ones.
PAST = 8
# The static cache's length (llama-static).
CACHE_LENGTH = 32


def decode_step(model, layers, torch):
    """`model` as one decoding step with a key/value cache, as such a step is
    exported for serving: the new token and every layer's cached keys and
    values in, the logits and every layer's keys and values (the cache with
    the new token's appended) out."""
    from transformers import DynamicCache

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, *cached):
            cache = DynamicCache()
            for layer in range(layers):
                cache.update(cached[2 * layer], cached[2 * layer + 1], layer)
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
            present = out.past_key_values.layers
            return (out.logits,) + tuple(t for layer in present[:layers]
                                         for t in (layer.keys, layer.values))
    return Step()


def legacy_cache_step(model, layers, torch):
    """`model` as a decoding step with transformers 4.x's cache of (key,
    value) tuples, as Optimum exports its decoder with past."""
    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask, *cached):
            past = tuple((cached[2 * layer], cached[2 * layer + 1])
                         for layer in range(layers))
            logits, present = self.model(input_ids=ids, attention_mask=mask,
                                         past_key_values=past, use_cache=True,
                                         return_dict=False)[:2]
            return (logits,) + tuple(t for pair in present for t in pair)
    return Step()


def static_cache_4x():
    """Whether transformers' StaticCache is 4.x's (sized by batch at
    construction, tensors in key_cache and value_cache) rather than 5.x's
    (layers made on first use)."""
    from transformers import StaticCache
    return "batch_size" in inspect.signature(StaticCache.__init__).parameters


def static_cache_step(model, layers, torch):
    """`model` writing its new tokens' keys and values into a static cache
    of CACHE_LENGTH positions at `cache_position` (transformers' StaticCache,
    whose tensors are the inputs, updated in place) and returning the logits
    and the whole cache. transformers 4.x writes at `cache_position`; 5.x at
    its count of the tokens seen (one a layer), here the first position, so
    the positions must follow each other."""
    from transformers import StaticCache
    legacy = static_cache_4x()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask, position, *cached):
            if legacy:
                cache = StaticCache(model.config, batch_size=ids.shape[0],
                                    max_cache_len=CACHE_LENGTH, device="cpu",
                                    dtype=torch.float32)
                for layer in range(layers):
                    cache.key_cache[layer] = cached[2 * layer]
                    cache.value_cache[layer] = cached[2 * layer + 1]
            else:
                cache = StaticCache(config=model.config, max_cache_len=CACHE_LENGTH)
                for layer, entry in enumerate(cache.layers[:layers]):
                    keys, values = cached[2 * layer], cached[2 * layer + 1]
                    entry.lazy_initialization(keys, values)
                    entry.keys, entry.values = keys, values
                    # Each layer counts on its own (a copy: it adds in place).
                    entry.cumulative_length = position[0].clone()
            positions = position.unsqueeze(0).expand(ids.shape[0], -1)
            logits = self.model(input_ids=ids, attention_mask=mask,
                                past_key_values=cache, cache_position=position,
                                position_ids=positions, use_cache=True,
                                return_dict=False)[0]
            if legacy:
                tensors = [(cache.key_cache[layer], cache.value_cache[layer])
                           for layer in range(layers)]
            else:
                tensors = [(entry.keys, entry.values) for entry in cache.layers[:layers]]
            return (logits,) + tuple(t for pair in tensors for t in pair)
    return Step()


# The static cache's batch is fixed; the number of new tokens is not.
STATIC_CACHE_AXES = {"input_ids": {1: "sequence"}, "cache_position": {0: "sequence"},
                     "logits": {1: "sequence"}}


def static_cache_export(model, torch, tokens=4, first=5):
    """(module, example inputs, input names, output names) of `model` as a
    step with a static cache (static_cache_step): `tokens` new tokens
    written from position `first` on, the attention mask over the whole
    cache, the cache's tensors random. With the TorchScript exporter,
    export with STATIC_CACHE_AXES."""
    from transformers import StaticCache
    config = model.config
    layers = config.num_hidden_layers
    if static_cache_4x():
        # The cache's tensors as transformers 4.x makes them, for their shapes.
        probe = StaticCache(config, batch_size=BATCH, max_cache_len=CACHE_LENGTH,
                            device="cpu", dtype=torch.float32)
        shapes = [t.shape for layer in range(layers)
                  for t in (probe.key_cache[layer], probe.value_cache[layer])]
    else:
        # 5.x makes them on first use: [batch, key/value heads, length, head].
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head = getattr(config, "head_dim", None) or config.hidden_size // heads
        shapes = [(BATCH, kv_heads, CACHE_LENGTH, head)] * (2 * layers)
    cached = [torch.randn(shape) for shape in shapes]
    kv = [f"{layer}.{part}" for layer in range(layers) for part in ("key", "value")]
    return (static_cache_step(model, layers, torch),
            (torch.randint(0, VOCAB, (BATCH, tokens)),
             torch.ones(BATCH, CACHE_LENGTH, dtype=torch.long),
             torch.arange(first, first + tokens), *cached),
            ["input_ids", "attention_mask", "cache_position"]
            + [f"past_key_values.{n}" for n in kv],
            ["logits"] + [f"present.{n}" for n in kv])


def build(name, transformers, torch):
    """(model, example inputs, input names, output names or None) of one
    model."""
    if name.endswith("-decode"):
        model = build(name[:-len("-decode")], transformers, torch)[0]
        config, layers = model.config, SIZES["num_hidden_layers"]
        head = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads)
        ids = torch.randint(0, VOCAB, (BATCH, 1))
        # Falcon's config names it num_kv_heads, which multi-query
        # attention (one key/value head) overrides.
        kv_heads = getattr(config, "num_key_value_heads", None) or (
            1 if config.multi_query else config.num_kv_heads)
        cached = [torch.randn(BATCH, kv_heads, PAST, head)
                  for _ in range(2 * layers)]
        kv = [f"{layer}.{part}" for layer in range(layers) for part in ("key", "value")]
        return (decode_step(model, layers, torch), (ids, *cached),
                ["input_ids"] + [f"past.{n}" for n in kv],
                ["logits"] + [f"present.{n}" for n in kv])
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    if name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
            use_cache=False)
        return transformers.GPT2LMHeadModel(config), (ids,), ["input_ids"], None
    if name == "llama":
        config = transformers.LlamaConfig(**SIZES, num_key_value_heads=2)
        return transformers.LlamaForCausalLM(config), (ids,), ["input_ids"], None
    if name == "llama-past":
        # Optimum's decoder with past: one new token, the attention mask over
        # the cached and the new tokens, the cache as (key, value) pairs a
        # layer (transformers 4.x's tuples) in and out.
        config = transformers.LlamaConfig(**dict(SIZES, use_cache=True),
                                          num_key_value_heads=2)
        model, layers = transformers.LlamaForCausalLM(config), SIZES["num_hidden_layers"]
        head = config.hidden_size // config.num_attention_heads
        mask = torch.ones(BATCH, PAST + 1, dtype=torch.long)
        mask[1, :3] = 0
        cached = [torch.randn(BATCH, 2, PAST, head) for _ in range(2 * layers)]
        kv = [f"{layer}.{part}" for layer in range(layers) for part in ("key", "value")]
        return (legacy_cache_step(model, layers, torch),
                (torch.randint(0, VOCAB, (BATCH, 1)), mask, *cached),
                ["input_ids", "attention_mask"] + [f"past_key_values.{n}" for n in kv],
                ["logits"] + [f"present.{n}" for n in kv])
    if name == "llama-static-step":
        # One new token a sequence at position 9 (the dynamo exporter's
        # shapes are static; the position is an input).
        config = transformers.LlamaConfig(**dict(SIZES, use_cache=True),
                                          num_key_value_heads=2)
        return static_cache_export(transformers.LlamaForCausalLM(config), torch,
                                   tokens=1, first=9)[:4]
    if name == "llama-static":
        config = transformers.LlamaConfig(**dict(SIZES, use_cache=True),
                                          num_key_value_heads=2)
        return static_cache_export(transformers.LlamaForCausalLM(config), torch)[:4]
    if name == "llama-masked":
        # Left padding, as a batch of prompts is padded for generation.
        config = transformers.LlamaConfig(**SIZES, num_key_value_heads=2)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[1, :5] = 0
        return (transformers.LlamaForCausalLM(config), (ids, mask),
                ["input_ids", "attention_mask"], ["logits"])
    if name == "qwen2":
        config = transformers.Qwen2Config(**SIZES, num_key_value_heads=2)
        return transformers.Qwen2ForCausalLM(config), (ids,), ["input_ids"], None
    if name == "qwen3":
        config = transformers.Qwen3Config(**SIZES, num_key_value_heads=2,
                                          head_dim=16)
        return transformers.Qwen3ForCausalLM(config), (ids,), ["input_ids"], None
    if name == "phi":
        # Phi-1.5's partial rotary embedding: half of each head rotated.
        config = transformers.PhiConfig(**SIZES, partial_rotary_factor=0.5)
        return transformers.PhiForCausalLM(config), (ids,), ["input_ids"], None
    if name == "bert":
        config = transformers.BertConfig(**SIZES)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        if BATCH > 1:
            mask[1, SEQ // 2:] = 0  # the second sequence is padded
        types = torch.zeros(BATCH, SEQ, dtype=torch.long)
        return (transformers.BertModel(config), (ids, mask, types),
                ["input_ids", "attention_mask", "token_type_ids"],
                ["last_hidden_state", "pooler_output"])
    if name == "roberta":
        config = transformers.RobertaConfig(**SIZES)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        return (transformers.RobertaModel(config), (ids, mask),
                ["input_ids", "attention_mask"], None)
    if name == "gemma":
        # One key/value head for four query heads (multi-query attention).
        config = transformers.GemmaConfig(**SIZES, num_key_value_heads=1,
                                          head_dim=16)
        return transformers.GemmaForCausalLM(config), (ids,), ["input_ids"], None
    if name == "gptj":
        # Rotary embedding of 8 of each head's 16 features, interleaved,
        # from a table gathered with GatherElements.
        config = transformers.GPTJConfig(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
            n_positions=128, use_cache=False)
        return transformers.GPTJForCausalLM(config), (ids,), ["input_ids"], None
    if name == "falcon":
        # Multi-query attention fused into one projection, K and V picked
        # out of it with GatherND.
        config = transformers.FalconConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, new_decoder_architecture=False,
            multi_query=True, alibi=False, use_cache=False)
        return transformers.FalconForCausalLM(config), (ids,), ["input_ids"], None
    if name == "vit":
        # Images of 32 x 32 in patches of 8 x 8 (a Conv whose stride is its
        # kernel).
        config = transformers.ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, image_size=32, patch_size=8)
        pixels = torch.randn(BATCH, 3, 32, 32)
        return transformers.ViTModel(config), (pixels,), ["pixel_values"], None
    if name == "clip":
        # CLIP's text encoder: pooled at each sequence's end token, found
        # with ArgMax over the token ids.
        config = transformers.CLIPTextConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=32)
        return transformers.CLIPTextModel(config), (ids,), ["input_ids"], None
    if name == "phi3":
        # Q, K and V as one projection of unequal parts (4 query heads, 2
        # key/value heads), gate and up as another.
        config = transformers.Phi3Config(**SIZES, num_key_value_heads=2,
                                         pad_token_id=0)
        return transformers.Phi3ForCausalLM(config), (ids,), ["input_ids"], None
    if name == "gpt-neox":
        # Rotary embedding of a quarter of each head (rotary_pct): the
        # rotated part and the part passed through are of unequal sizes.
        config = transformers.GPTNeoXConfig(**SIZES, rotary_pct=0.25)
        return transformers.GPTNeoXForCausalLM(config), (ids,), ["input_ids"], None
    raise ValueError(name)


def randomize(model, torch):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.02)
            elif "norm" in name.lower():
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.1)


def by_name(model, names, torch):
    """The model called with its inputs by name and nothing else, as Optimum
    exports with the TorchScript exporter: traced through a plain call, an
    argument left at its default (transformers 4.x's num_logits_to_keep)
    would become a graph input."""
    class ByName(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs)), return_dict=False)
    return ByName()


def export_torchscript(out_dir, transformers, torch):
    torch.manual_seed(0)
    for name, opset, file in TORCHSCRIPT_EXPORTS:
        model, inputs, names, outputs = build(name, transformers, torch)
        model.eval()
        randomize(model, torch)
        path = os.path.join(out_dir, file)
        outputs = outputs or ["out"]
        # Batch and sequence axes (the cache's sequence is its third).
        axes = {n: {0: "batch", 2 if "." in n else 1: "sequence"}
                for n in names + outputs}
        if name.endswith("-past"):
            axes["attention_mask"] = {0: "batch", 1: "total"}
        elif name.endswith("-static"):
            axes = STATIC_CACHE_AXES
        else:
            model = by_name(model, names, torch)
        torch.onnx.export(model, inputs, path,
                          input_names=names, output_names=outputs,
                          opset_version=opset, dynamic_axes=axes, dynamo=False,
                          do_constant_folding=True)
        print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--torchscript", action="store_true",
                        help="only the TorchScript exporter's models (needs "
                        "transformers 4.x)")
    args = parser.parse_args()
    import torch
    import transformers
    os.makedirs(args.out_dir, exist_ok=True)
    if args.torchscript:
        export_torchscript(args.out_dir, transformers, torch)
        return
    torch.manual_seed(0)
    for name, opset, suffix in EXPORTS:
        model, inputs, names, outputs = build(name, transformers, torch)
        model.eval()
        randomize(model, torch)
        path = os.path.join(args.out_dir, f"hf-{name}{suffix}.onnx")
        torch.onnx.export(model, inputs, path, input_names=names,
                          output_names=outputs or ["out"], opset_version=opset,
                          dynamo=True, external_data=False)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
