"""Runs MODEL in ONNX Runtime on the given inputs and compares one output file.

Usage: compare_with_ort.py MODEL NAME=INPUT.npy ... OUTPUT=RESULT.npy
The last argument names the output and Cleave's result for it.
"""
import sys

import numpy as np
import onnxruntime as ort

model, *pairs = sys.argv[1:]
inputs = {k: np.load(v) for k, v in (p.split("=", 1) for p in pairs[:-1])}
name, result = pairs[-1].split("=", 1)
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
expected = session.run([name], inputs)[0]
actual = np.load(result)
if actual.shape == expected.shape and np.allclose(actual, expected, rtol=1e-5, atol=1e-5):
    print(f"{name}: matches ONNX Runtime")
else:
    print(f"{name}: differs from ONNX Runtime: {actual} vs {expected}")
    sys.exit(1)
