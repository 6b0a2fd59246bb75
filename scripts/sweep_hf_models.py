#!/usr/bin/env python3
"""Exports many small Hugging Face architectures and checks each with Cleave.

Each model (2 layers of width 64, 4 heads, random weights, no download) is
exported as export_hf_models.py exports the committed test models
(torch.onnx.export, dynamo=True, opset 18, batch 2 x 16 tokens unless
--batch and --seq say otherwise), then
check_model.py compiles and runs it twice: on one rank, and with
--mesh tp=2 --shard-preset megatron against the one-rank program. Both must
match ONNX Runtime (rtol 1e-4, atol 1e-5). One line per model: whether the
export worked, both checks, the collectives per run at tp=2 and the
preset's warning if it gave one. It measures coverage; it asserts nothing
(the committed models' checks are in test/e2e/models.test).

With --gpu, instead of the two CPU checks: the CUDA target's bundle is built
(kernels to cubins, linked; no GPU needed), its kernels and cuBLASLt calls
are counted, and the program with the very kernels the CUDA target builds,
run on the CPU (--gpu-kernels-on-cpu), is checked against ONNX Runtime.

With --static-cache, each causal LM that supports transformers' StaticCache
is exported as a step with a static cache of export_hf_models.CACHE_LENGTH
positions (export_hf_models.static_cache_export) and checked three times.
With --exporter torchscript (transformers 4.x), whose export leaves the
number of new tokens open: a prompt of 5 tokens at positions 0 to 4 on one
rank and at tp=2 against one rank, and one token at position 9. With the
dynamo exporter (transformers 5.x; static shapes): one new token, at
position 9 on one rank and at tp=2, and at position 31 with a random mask.
With --gpu too: one token at position 9 on the CUDA target, as --gpu checks.

Needs torch, transformers and onnxscript. Usage:
  sweep_hf_models.py WORK_DIR [--only NAME ...] [--gpu] [--batch B] [--seq S]
                     [--exporter dynamo|torchscript] [--opset N]
                     [--static-cache] [--bin DIR]
"""
import argparse
import contextlib
import io
import os
import re
import subprocess
import sys

import export_hf_models as hf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "test", "Codegen", "CUDA"))
import count_kernels  # noqa: E402  (test/Codegen/CUDA: what the lit tests count)

VOCAB = hf.VOCAB

# name -> (config class, model class, config arguments); SIZES is the
# LLaMA-style set of common arguments.
S = hf.SIZES
ARCHITECTURES = {
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(S, num_key_value_heads=2)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(S, num_key_value_heads=2, head_dim=16)),
    "opt": ("OPTConfig", "OPTForCausalLM",
            dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=4, ffn_dim=128, max_position_embeddings=128,
                 word_embed_proj_dim=64, use_cache=False)),
    "gpt-bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM",
                    dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                         n_positions=128, use_cache=False, multi_query=True)),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   dict(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                        hidden_dim=128, max_position_embeddings=128)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(S, num_key_value_heads=2)),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM",
                   dict(S, num_key_value_heads=2)),
    "bloom": ("BloomConfig", "BloomForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4,
                   use_cache=False)),
    "mpt": ("MptConfig", "MptForCausalLM",
            dict(vocab_size=VOCAB, d_model=64, n_layers=2, n_heads=4,
                 expansion_ratio=2, max_seq_len=128, use_cache=False)),
    "t5-encoder": ("T5Config", "T5EncoderModel",
                   dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                        num_layers=2, num_heads=4)),
    "deberta-v2": ("DebertaV2Config", "DebertaV2Model",
                   {k: v for k, v in S.items() if k != "use_cache"}),
    "electra": ("ElectraConfig", "ElectraModel",
                dict(vocab_size=VOCAB, embedding_size=32, hidden_size=64,
                     num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128)),
    "albert": ("AlbertConfig", "AlbertModel",
               dict(vocab_size=VOCAB, embedding_size=32, hidden_size=64,
                    num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128)),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", dict(S)),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(S, num_key_value_heads=2)),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                     rotary_dim=8, n_positions=128, use_cache=False)),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", dict(S)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", dict(S, num_key_value_heads=2)),
    "mobilebert": ("MobileBertConfig", "MobileBertModel",
                   dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        embedding_size=32, intra_bottleneck_size=32,
                        true_hidden_size=32)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(S, num_key_value_heads=2, num_local_experts=4,
                     num_experts_per_tok=2)),
}
# Models with other inputs than token ids: name -> (input name, shape of
# one item of the batch).
IMAGES = {
    "clip-vision": ("CLIPVisionConfig", "CLIPVisionModel",
                    dict(hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         image_size=32, patch_size=8),
                    "pixel_values", (3, 32, 32)),
}
# The committed ones (export_hf_models.py), swept again for the tp=2 line.
COMMITTED = list(dict.fromkeys(name for name, _, _ in hf.EXPORTS))


def build(name, transformers, torch):
    if name in COMMITTED:
        model, inputs, names, _ = hf.build(name, transformers, torch)
        return model, inputs, names
    if name in IMAGES:
        config, model, kwargs, input_name, shape = IMAGES[name]
        config = getattr(transformers, config)(**kwargs)
        return (getattr(transformers, model)(config), (torch.randn(hf.BATCH, *shape),),
                [input_name])
    config, model, kwargs = ARCHITECTURES[name]
    config = getattr(transformers, config)(**kwargs)
    ids = torch.randint(0, VOCAB, (hf.BATCH, hf.SEQ))
    return getattr(transformers, model)(config), (ids,), ["input_ids"]


def check(path, shapes, int_high, work, bin_dir, extra):
    """(matched ONNX Runtime, matched one rank or None, collectives, warning)."""
    command = [sys.executable, os.path.join(os.path.dirname(__file__), "check_model.py"),
               path, "--int-high", str(int_high), "--work", work, "--bin", bin_dir]
    command += [f"--input-shape={s}" for s in shapes] + extra
    result = subprocess.run(command, capture_output=True, text=True)
    text = result.stdout + result.stderr
    ort = re.search(r"outputs match ONNX Runtime(?: with \w+ GEMM operands)?: yes",
                    text) is not None
    ranks = ("outputs match the single-rank program: yes" in text) if extra else None
    collectives = re.search(r"Collectives per run: ([^;]*);", text)
    warning = re.search(r"warning: preset megatron: (.*)", text)
    error = re.search(r"cleave-compile: error: (.*)", text)
    return (ort, ranks, collectives.group(1) if collectives else "-",
            warning.group(1)[:100] if warning else (error.group(1)[:100] if error else ""))


def check_gpu(path, shapes, int_high, work, bin_dir, dims=(), values=(),
              precision="f32"):
    """The CUDA target without a GPU: (bundle built, kernels, GEMM calls,
    the GPU kernels run on the CPU match ONNX Runtime). The bundle is built
    to the end (ptxas, link) in one compile that also keeps the lowered
    module, where the kernels and cuBLASLt calls are counted (as
    test/Codegen/CUDA/kernels.test does). `dims` (NAME=N) size named dimensions,
    `values` (NAME=V,...) choose inputs (check_model.py --input-values).
    With a 16-bit `precision` both compile with it and the check takes
    check_model.py's rounded-operand reference."""
    os.makedirs(work, exist_ok=True)
    dumps = os.path.join(work, "phases")
    built = subprocess.run([os.path.join(bin_dir, "cleave-compile"), path,
                            "--target", "cuda", "--quiet", "--dump-dir", dumps,
                            "-o", os.path.join(work, "bundle"),
                            f"--precision={precision}"]
                           + [f"--dim={d}" for d in dims],
                           capture_output=True).returncode == 0
    kernels = gemms = "-"
    lowered = os.path.join(dumps, "05-lower.mlir")
    if os.path.exists(lowered):
        _, kernels, gemms, _, _, _ = count_kernels.counts(lowered, path)
    extra = ["--compile-arg=--gpu-kernels-on-cpu"]
    if precision != "f32":
        extra += [f"--compile-arg=--precision={precision}",
                  f"--reference-precision={precision}"]
    extra += [f"--dim={d}" for d in dims] + [f"--input-values={v}" for v in values]
    emulated, _, _, _ = check(path, shapes, int_high, os.path.join(work, "emulated"),
                              bin_dir, extra)
    return built, kernels, gemms, emulated


def check_static_cache_gpu(name, path, args):
    """Prints the line of a static-cache step on the CUDA target: one token
    at position 9, the mask all ones (--gpu with --static-cache)."""
    dims = ["sequence=1"] if args.exporter == "torchscript" else []
    built, kernels, gemms, emulated = check_gpu(
        path, [], VOCAB, os.path.join(args.work, name + "-cuda"), args.bin, dims,
        ["cache_position=9", "attention_mask=1"])
    ok = lambda b: "yes" if b else "NO"
    print(f"{name:14} {'yes':7} {ok(built):7} {kernels:<8} {gemms:<6} "
          f"{ok(emulated):7}", flush=True)


def supports_static_cache(model):
    """Whether transformers says `model` takes a StaticCache: 4.x's flag, or
    in 5.x (which dropped it) a causal LM that compiles whole."""
    flag = getattr(model, "_supports_static_cache", None)
    if flag is not None:
        return flag
    return (getattr(model, "_can_compile_fullgraph", False)
            and type(model).__name__.endswith("ForCausalLM"))


def check_static_cache(name, path, args):
    """Prints the line of a step with a static cache. TorchScript exports: a
    prompt of 5 tokens at positions 0-4 (one rank; tp=2 against one rank)
    and one token at position 9, the mask over the whole cache all ones.
    Dynamo exports (one token): at position 9 (one rank; tp=2), and at 31
    with a random mask (0 and 1; the token ids then too)."""
    def run(tag, tokens, positions, extra, mask="1"):
        sizes = [f"--dim=sequence={tokens}"] if args.exporter == "torchscript" else []
        values = ["--input-values=cache_position=" + positions]
        values += [f"--input-values=attention_mask={mask}"] if mask else []
        return check(path, [], VOCAB if mask else 2,
                     os.path.join(args.work, f"{name}-{tag}"), args.bin,
                     sizes + values + extra)
    split = ["--compile-arg=--mesh=tp=2", "--compile-arg=--shard-preset=megatron",
             "--compare-single-rank"]
    if args.exporter == "torchscript":
        prompt = run("prompt", 5, "0,1,2,3,4", [])[0]
        two, ranks, collectives, note = run("prompt-tp2", 5, "0,1,2,3,4", split)
        step, _, _, step_note = run("step", 1, "9", [])
    else:
        prompt = run("at9", 1, "9", [])[0]
        two, ranks, collectives, note = run("at9-tp2", 1, "9", split)
        step, _, _, step_note = run("at31", 1, "31", [], mask=None)
    ok = lambda b: "yes" if b else "NO"
    print(f"{name:14} {'yes':7} {ok(prompt):7} {ok(two and ranks):7} {ok(step):7} "
          f"{collectives}; {note or step_note}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--gpu", action="store_true",
                        help="instead of tp=2: the CUDA target's bundle, its kernels "
                             "and GEMM calls, and its kernels run on the CPU")
    parser.add_argument("--batch", type=int, default=hf.BATCH,
                        help="sequences per input (default %(default)s)")
    parser.add_argument("--seq", type=int, default=hf.SEQ,
                        help="tokens per sequence (default %(default)s)")
    parser.add_argument("--exporter", choices=["dynamo", "torchscript"],
                        default="dynamo",
                        help="torch.onnx.export's dynamo exporter (default) or "
                        "the older TorchScript one (dynamo=False), which "
                        "Optimum and most ONNX files on the Hub were written with")
    parser.add_argument("--opset", type=int, default=18,
                        help="the ONNX opset to export at (default %(default)s)")
    parser.add_argument("--precision", choices=["f32", "bf16", "f16"],
                        default="f32",
                        help="with --gpu: GEMM operands (check_model.py's "
                        "rounded-operand reference for 16-bit ones)")
    parser.add_argument("--static-cache", action="store_true",
                        help="causal LMs as steps with a static key/value cache")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..",
                                                      "build", "bin"))
    args = parser.parse_args()
    hf.BATCH, hf.SEQ = args.batch, args.seq
    import torch
    import transformers
    names = args.only or (COMMITTED + list(ARCHITECTURES) + list(IMAGES))
    os.makedirs(args.work, exist_ok=True)
    if args.gpu:
        print(f"{'model':14} {'export':7} {'cuda':7} {'kernels':8} {'GEMMs':6} "
              f"{'on CPU':7}")
    elif args.static_cache and args.exporter == "torchscript":
        print(f"{'model':14} {'export':7} {'prompt':7} {'tp=2':7} {'step':7} "
              f"collectives at tp=2; note")
    elif args.static_cache:
        print(f"{'model':14} {'export':7} {'at 9':7} {'tp=2':7} {'at 31':7} "
              f"collectives at tp=2; note")
    else:
        print(f"{'model':14} {'export':7} {'1 rank':7} {'tp=2':7} "
              f"collectives at tp=2; note")
    for name in names:
        torch.manual_seed(0)
        path = os.path.join(args.work, f"{name}.onnx")
        # The exporter reports its progress on stdout; the table goes there.
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log):
                model, inputs, input_names = build(name, transformers, torch)
                model.eval()
                hf.randomize(model, torch)
                output_names, axes = None, None
                if args.static_cache:
                    if name in IMAGES or name.endswith(("-decode", "-step")) or \
                            not supports_static_cache(model):
                        # (stdout is the exporter's log here)
                        print(f"{name:14} {'-':7} {'-':7} {'-':7} {'-':7} - ; no "
                              "static cache in transformers for it",
                              file=sys.__stdout__, flush=True)
                        continue
                    model.config.use_cache = True
                    if args.exporter == "torchscript":
                        model, inputs, input_names, output_names = (
                            hf.static_cache_export(model, torch))
                        axes = hf.STATIC_CACHE_AXES
                    else:
                        model, inputs, input_names, output_names = (
                            hf.static_cache_export(model, torch, tokens=1, first=9))
                elif args.exporter == "torchscript" and not name.endswith(
                        ("-decode", "-step")):
                    model = hf.by_name(model, input_names, torch)
                torch.onnx.export(model, inputs, path, input_names=input_names,
                                  output_names=output_names, opset_version=args.opset,
                                  dynamo=args.exporter == "dynamo",
                                  external_data=False,
                                  **({} if args.exporter == "dynamo"
                                     else dict(do_constant_folding=True,
                                               dynamic_axes=axes)))
        except Exception as e:  # the exporter's failures are findings too
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
            first = message.splitlines()[0] if message else ""
            print(f"{name:14} {'FAILED':7} {'-':7} {'-':7} - ; {type(e).__name__}: "
                  f"{first[:80]}", flush=True)
            continue
        if args.static_cache:
            (check_static_cache_gpu if args.gpu else check_static_cache)(
                name, path, args)
            continue
        shapes = [f"{n}={'x'.join(str(d) for d in t.shape)}"
                  for n, t in zip(input_names, inputs)]
        # Token ids over the vocabulary; with masks or token types beside
        # them, 0 and 1 only (as test/e2e/models.test runs BERT).
        int_high = VOCAB if len(input_names) == 1 else 2
        if args.gpu:
            built, kernels, gemms, emulated = check_gpu(
                path, shapes, int_high, os.path.join(args.work, name + "-cuda"),
                args.bin, precision=args.precision)
            ok = lambda b: "yes" if b else "NO"
            print(f"{name:14} {'yes':7} {ok(built):7} {kernels:<8} {gemms:<6} "
                  f"{ok(emulated):7}", flush=True)
            continue
        one, _, _, note1 = check(path, shapes, int_high,
                                 os.path.join(args.work, name + "-1"), args.bin, [])
        two, ranks, collectives, note2 = check(
            path, shapes, int_high, os.path.join(args.work, name + "-tp2"), args.bin,
            ["--compile-arg=--mesh=tp=2", "--compile-arg=--shard-preset=megatron",
             "--compare-single-rank"])
        ok = lambda b: "yes" if b else "NO"
        print(f"{name:14} {'yes':7} {ok(one):7} {ok(two and ranks):7} {collectives}; "
              f"{note2 or note1}", flush=True)


if __name__ == "__main__":
    main()
