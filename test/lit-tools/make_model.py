#!/usr/bin/env python3
"""Writes small ONNX models that ONNX's text syntax cannot express, for tests.

Usage: make_model.py KIND OUT.onnx

Kinds:
  external   MatMul with a weight stored in OUT.onnx's folder as 'weights.bin',
             plus a small int64 shape initializer and a float scale vector
  unused     a model with an initializer nothing reads
  constant   MatMul with its 64x32 weight written as a Constant node
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def external(out):
    folder = os.path.dirname(os.path.abspath(out))
    weight = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    w = numpy_helper.from_array(weight, "proj.weight")
    with open(os.path.join(folder, "weights.bin"), "wb") as f:
        f.write(b"\0" * 64)  # an offset, as exporters that pack tensors use
        f.write(weight.tobytes())
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "64"),
                       ("length", str(weight.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    shape = numpy_helper.from_array(np.array([2, 4, 8], dtype=np.int64), "shape")
    scale = numpy_helper.from_array(np.full(8, 0.5, dtype=np.float32), "scale")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "proj.weight"], ["h"], name="proj"),
         helper.make_node("Mul", ["h", "scale"], ["s"], name="scale_mul"),
         helper.make_node("Reshape", ["s", "shape"], ["y"], name="reshape")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8])],
        [w, shape, scale])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def unused(out):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "unused",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "stale.weight")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def constant(out):
    weight = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) % 7) - 3
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["proj.weight"], name="weight",
                          value=numpy_helper.from_array(weight)),
         helper.make_node("MatMul", ["x", "proj.weight"], ["y"], name="proj")],
        "constant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


if __name__ == "__main__":
    kinds = {"external": external, "unused": unused, "constant": constant}
    if len(sys.argv) != 3 or sys.argv[1] not in kinds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kinds[sys.argv[1]](sys.argv[2])
