#!/usr/bin/env python3
"""Exports small transformer models with PyTorch's ONNX exporter.

The exported files are checked in under test/models/ so that tests need no
PyTorch; run this script again (it needs `torch`) to regenerate them. Batch and
sequence axes are exported as dynamic, so the graphs carry the Shape/Gather/
Concat/Reshape chains, Range-based positions and mask arithmetic that real
exports have. Weights are random with a fixed seed.

Usage: export_torch_models.py [--out DIR] [--opsets 14 17]
"""
import argparse
import math
import os

import torch
from torch import nn

D_MODEL, HEADS, KV_HEADS, FFN, VOCAB, LAYERS, MAX_POS = 64, 4, 2, 128, 97, 2, 64


class Gpt2Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D_MODEL)
        self.attn_qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.attn_proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln_2 = nn.LayerNorm(D_MODEL)
        self.mlp_fc = nn.Linear(D_MODEL, FFN)
        self.mlp_proj = nn.Linear(FFN, D_MODEL)
        self.register_buffer(
            "bias", torch.tril(torch.ones(MAX_POS, MAX_POS)).view(1, 1, MAX_POS, MAX_POS))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.attn_qkv(self.ln_1(x)).split(D_MODEL, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(nn.functional.gelu(self.mlp_fc(self.ln_2(x))))


class Gpt2(nn.Module):
    """Token and position embeddings, pre-LN blocks, causal mask, GELU MLP,
    LM head tied to the token embedding."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D_MODEL)
        self.wpe = nn.Embedding(MAX_POS, D_MODEL)
        self.blocks = nn.ModuleList(Gpt2Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)

    def forward(self, input_ids):
        t = input_ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


class RmsNorm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D_MODEL) + 0.1 * torch.randn(D_MODEL))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = D_MODEL // HEADS
        self.input_layernorm = RmsNorm()
        self.q_proj = nn.Linear(D_MODEL, HEADS * self.head_dim, bias=False)
        self.k_proj = nn.Linear(D_MODEL, KV_HEADS * self.head_dim, bias=False)
        self.v_proj = nn.Linear(D_MODEL, KV_HEADS * self.head_dim, bias=False)
        self.o_proj = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.post_attention_layernorm = RmsNorm()
        self.gate_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.up_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, D_MODEL, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, HEADS, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        reps = HEADS // KV_HEADS
        k = k[:, :, None, :, :].expand(b, KV_HEADS, reps, t, self.head_dim).reshape(
            b, HEADS, t, self.head_dim)
        v = v[:, :, None, :, :].expand(b, KV_HEADS, reps, t, self.head_dim).reshape(
            b, HEADS, t, self.head_dim)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        y = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, D_MODEL)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """RMSNorm, rotary position embeddings, SwiGLU, grouped-query attention."""

    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList(LlamaBlock() for _ in range(LAYERS))
        self.norm = RmsNorm()
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        head_dim = D_MODEL // HEADS
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, input_ids):
        b, t = input_ids.shape
        positions = torch.arange(t, device=input_ids.device).float()
        freqs = torch.outer(positions, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


class Encoder(nn.Module):
    """nn.TransformerEncoder, batch first, with a learned input projection."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0,
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class Mha(nn.Module):
    """nn.MultiheadAttention, self-attention, sequence first."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, dropout=0.0)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def export(model, example, input_name, dynamic_axes, path, opset):
    model.eval()
    torch.onnx.export(model, (example,), path, input_names=[input_name],
                      output_names=["output"], opset_version=opset,
                      dynamic_axes={input_name: dynamic_axes, "output": dynamic_axes},
                      dynamo=False, do_constant_folding=True)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..",
                                                      "test", "models"))
    parser.add_argument("--opsets", type=int, nargs="+", default=[14, 17])
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ids = torch.randint(0, VOCAB, (2, 16))
    hidden = torch.randn(2, 16, D_MODEL)
    for opset in args.opsets:
        torch.manual_seed(0)
        export(Gpt2(), ids, "input_ids", {0: "batch", 1: "seq"},
               os.path.join(args.out, f"gpt2-opset{opset}.onnx"), opset)
        torch.manual_seed(0)
        export(Llama(), ids, "input_ids", {0: "batch", 1: "seq"},
               os.path.join(args.out, f"llama-opset{opset}.onnx"), opset)
        torch.manual_seed(0)
        export(Encoder(), hidden, "x", {0: "batch", 1: "seq"},
               os.path.join(args.out, f"encoder-opset{opset}.onnx"), opset)
        torch.manual_seed(0)
        export(Mha(), hidden.transpose(0, 1).contiguous(), "x", {0: "seq", 1: "batch"},
               os.path.join(args.out, f"mha-opset{opset}.onnx"), opset)


if __name__ == "__main__":
    main()
