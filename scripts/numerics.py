"""How Cleave's checks judge a program's outputs against a reference.

Plain numpy, so that machines without ONNX or ONNX Runtime (a lent GPU
machine) judge the same way as check_model.py does here.
"""
import numpy as np

# The rounding unit of each 16-bit GEMM operand type (--precision).
UNITS = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def within(actual, expected, rtol=1e-4, atol=1e-5):
    """(ok, max |diff|): every |actual - expected| <= atol + rtol * |expected|."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        return False, float("inf")
    diff = np.abs(actual - expected)
    worst = float(diff.max()) if diff.size else 0.0
    return bool((diff <= atol + rtol * np.abs(expected)).all()), worst


def rounded_gemms(actual, rounded, float32, precision):
    """(ok, message) for a program with 16-bit GEMM operands against the
    reference `rounded` (the model with GEMM operands rounded to `precision`)
    and the plain float32 reference: mean |diff| at most half of float32's
    distance from `rounded` (a program that did not narrow fails this), and
    every |diff| within the type's rounding unit of the largest |value|."""
    unit = UNITS[precision]
    actual = np.asarray(actual, np.float64)
    rounded = np.asarray(rounded, np.float64)
    if actual.shape != rounded.shape:
        return False, f"shape {actual.shape}, reference {rounded.shape}"
    diff = np.abs(actual - rounded)
    narrowing = np.abs(np.asarray(float32, np.float64) - rounded).mean()
    scale = np.abs(rounded).max()
    ok = diff.mean() <= 0.5 * narrowing and diff.max() <= unit * scale
    # Rounding changed nothing (no GEMM, or all-zero outputs): nothing to
    # tell a narrowed program from a float32 one by; the bound still holds.
    share = f"{diff.mean() / narrowing:.3g}" if narrowing > 0 else "n/a"
    relative = f"{diff.max() / scale:.3g}" if scale > 0 else "n/a"
    return bool(ok), (f"mean |diff| {diff.mean():.3g}, {share} of float32's "
                      f"({narrowing:.3g}); max |diff| {diff.max():.3g}, "
                      f"{relative} of the largest |value| (unit {unit:.3g})")
