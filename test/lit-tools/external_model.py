#!/usr/bin/env python3
"""Writes a model whose one weight is external data with the given fields.

Usage: external_model.py OUT.onnx LOCATION [OFFSET [LENGTH]]

The weight is 16 x 8 float32 (512 bytes); nothing is written at LOCATION:
the test makes the file (or the link) it wants there.
"""
import sys

import onnx
from onnx import TensorProto, helper


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, location = sys.argv[1], sys.argv[2]
    weight = TensorProto(name="proj.weight", data_type=TensorProto.FLOAT,
                         dims=[16, 8])
    weight.data_location = TensorProto.EXTERNAL
    fields = [("location", location)]
    if len(sys.argv) > 3:
        fields.append(("offset", sys.argv[3]))
    if len(sys.argv) > 4:
        fields.append(("length", sys.argv[4]))
    for key, value in fields:
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "proj.weight"], ["y"], name="proj")],
        "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
