"""Checks bundle.test's output against ONNX Runtime on the same model."""
import os
import sys

import numpy as np
import onnxruntime as ort

x = np.load(sys.argv[1])
y = np.load(sys.argv[2])
model = os.path.join(os.path.dirname(sys.argv[1]), "mlp.onnx")
expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
    None, {"x": x})[0]
if y.shape != expected.shape or not np.allclose(y, expected, rtol=1e-5, atol=1e-6):
    sys.exit(f"mismatch: {y} vs ONNX Runtime {expected}")
