"""Counts a model's MatMulNBits nodes and its lowered program's calls of
cleave_rt_sgemm_nbits (each call site is one GEMM), and says whether every
node became such a call.

Usage: nbits-gemm.test.py MODEL.onnx LOWERED.mlir
"""
import sys

import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
nodes = sum(node.op_type == "MatMulNBits" for node in model.graph.node)
with open(sys.argv[2]) as lowered:
    calls = lowered.read().count("llvm.call @cleave_rt_sgemm_nbits(")
if nodes == 0 or calls != nodes:
    sys.exit(f"{nodes} MatMulNBits nodes, {calls} calls of "
             f"cleave_rt_sgemm_nbits")
print("every MatMulNBits is a call on its codes")
