"""One model checked against ONNX Runtime and timed against it, through
scripts/check_model.py: the shared step of the benchmarks that compare
Cleave with ONNX Runtime on the same graph (bench_quantized.py,
bench_genai_int4.py)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LATENCY = re.compile(r"Cleave ([0-9.]+) ms .*ONNX Runtime ([0-9.]+) ms")


def time_against_ort(model, atol, threads, runs, rounds, bin_dir, work,
                     extra=()):
    """(Cleave ms, ONNX Runtime ms): p50s over `runs` runs, medians of
    `rounds` alternating rounds, at `threads` threads; `extra` are more
    check_model.py arguments (shapes, input values). Exits, printing
    check_model.py's report, where the outputs do not match within
    `atol`."""
    check = os.path.join(HERE, "..", "scripts", "check_model.py")
    result = subprocess.run(
        [sys.executable, check, model, "--atol", str(atol), "--bench",
         str(runs), "--bench-rounds", str(rounds), "--threads", str(threads),
         "--bin", bin_dir, "--work", work] + list(extra),
        check=True, capture_output=True, text=True)
    if "outputs match ONNX Runtime: yes" not in result.stdout:
        sys.exit(f"{model}: Cleave does not match ONNX Runtime:\n"
                 + result.stdout)
    found = LATENCY.search(result.stdout)
    return float(found.group(1)), float(found.group(2))
