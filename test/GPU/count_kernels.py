"""Per-layer counts of a model compiled with --target cuda --compile-to
lower, from the same stack at 1 and 2 layers (the difference is one layer):
kernels (cubins, gpu.binary), their launches, and cuBLASLt GEMM calls, next
to the ONNX MatMul nodes per layer counted in the models themselves.

With one model (MODEL.mlir MODEL.onnx), the same counts for the whole model.

Usage: count_kernels.py ONE.mlir ONE.onnx [TWO.mlir TWO.onnx]"""
import re
import sys

import onnx


def counts(mlir_path, onnx_path):
    text = open(mlir_path).read()
    model = onnx.load(onnx_path, load_external_data=False)
    return (len(re.findall(r"gpu\.binary @", text)),
            len(re.findall(r"gpu\.launch_func", text)),
            len(re.findall(r"llvm\.call @cleave_rt_cuda_(?:sgemm|gemm_)", text)),
            sum(node.op_type == "MatMul" for node in model.graph.node))


one = counts(sys.argv[1], sys.argv[2])
if len(sys.argv) == 3:
    kernels, launches, gemms, matmuls = one
    print(f"kernels: {kernels}, launches: {launches}; GEMM calls: {gemms}, "
          f"ONNX MatMul nodes: {matmuls}")
    sys.exit(0)
two = counts(sys.argv[3], sys.argv[4])
kernels, launches, gemms, matmuls = (b - a for a, b in zip(one, two))
print(f"kernels per layer: {kernels}, launches per layer: {launches}")
print(f"GEMM calls per layer: {gemms}, ONNX MatMul nodes per layer: {matmuls}")
print(f"every kernel a cubin, launched once: {'yes' if two[0] == two[1] else 'no'}")
