"""Compares the outputs in pairs of folders (the packed GEMM's, OpenBLAS's):
every .npy of the first must match the second's within the tolerance the
model checks against ONNX Runtime use (rtol 1e-4, atol 1e-5): the two sum
in different orders, and through several layers that differs by a few
float32 units."""
import os
import sys

import numpy as np

args = sys.argv[1:]
for packed, blas in zip(args[::2], args[1::2]):
    for name in sorted(os.listdir(blas)):
        a, b = np.load(os.path.join(packed, name)), np.load(os.path.join(blas, name))
        close = a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5)
        print(f"{name[:-4]} {a.shape}: {'agree' if close else 'DIFFER'}"
              f" (max |diff| {abs(a - b).max():.2g})")
