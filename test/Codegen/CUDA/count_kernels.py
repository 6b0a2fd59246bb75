"""Per-layer counts of a model compiled with --target cuda --compile-to
lower, from the same stack at 1 and 2 layers (the difference is one layer):
kernels (cubins, gpu.binary), their launches, and cuBLASLt GEMM calls, next
to the ONNX MatMul and Gemm nodes per layer counted in the models
themselves, and the GEMMs those make once those that multiply the same
activation by a weight each (Q, K and V; gate and up) are one GEMM
(cleave-join-projections), plus two for each ONNX Attention node (its
scores and its weighted sum of values), less two for each launch of an
attention kernel (cleave-attention-to-gpu: both of attention's GEMMs on
tensor cores inside it), which are counted apart.

With one model (MODEL.mlir MODEL.onnx), the same counts for the whole model.
scripts/sweep_hf_models.py --gpu imports counts() to count the same way.

Usage: count_kernels.py ONE.mlir ONE.onnx [TWO.mlir TWO.onnx]"""
import re
import sys

import onnx


def counts(mlir_path, onnx_path):
    text = open(mlir_path).read()
    model = onnx.load(onnx_path, load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    matmuls = [node for node in model.graph.node
               if node.op_type in ("MatMul", "Gemm")]
    joined = {node.input[0] for node in matmuls if node.input[1] in weights}
    alone = [node for node in matmuls if node.input[1] not in weights]
    attention = [node for node in model.graph.node
                 if node.op_type == "Attention"]
    fused = len(re.findall(r"gpu\.launch_func  @attention_", text))
    return (len(re.findall(r"gpu\.binary @", text)),
            len(re.findall(r"gpu\.launch_func", text)),
            len(re.findall(r"llvm\.call @cleave_rt_cuda_(?:sgemm|gemm_)", text)),
            len(matmuls),
            len(joined) + len(alone) + 2 * len(attention) - 2 * fused, fused)


def main():
    one = counts(sys.argv[1], sys.argv[2])
    if len(sys.argv) == 3:
        kernels, launches, gemms, matmuls, groups, fused = one
        print(f"kernels: {kernels}, launches: {launches}; GEMM calls: {gemms}, "
              f"ONNX MatMul and Gemm nodes: {matmuls}, joined: {groups}; "
              f"attention kernels: {fused}")
        return
    two = counts(sys.argv[3], sys.argv[4])
    kernels, launches, gemms, matmuls, groups, fused = (
        b - a for a, b in zip(one, two))
    print(f"kernels per layer: {kernels}, launches per layer: {launches}")
    print(f"GEMM calls per layer: {gemms}, ONNX MatMul and Gemm nodes per layer: "
          f"{matmuls}, joined: {groups}; attention kernels per layer: {fused}")
    print(f"every kernel a cubin, launched once: {'yes' if two[0] == two[1] else 'no'}")


if __name__ == "__main__":
    main()
