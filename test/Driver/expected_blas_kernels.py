"""The line `cleave-run --bench` should print about OpenBLAS's kernels on
this machine, worked out independently of cleave-run: OpenBLAS's own choice
(its core name, asked through ctypes with OPENBLAS_CORETYPE unset), unless
that is its generic Prescott fallback on a CPU whose /proc/cpuinfo flags
offer AVX-512 (SkylakeX kernels) or AVX2 with FMA (Haswell kernels)."""
import ctypes
import os

os.environ.pop("OPENBLAS_CORETYPE", None)
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
core = lib.openblas_get_corename().decode()
flags = set()
with open("/proc/cpuinfo") as cpuinfo:
    for line in cpuinfo:
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
if core == "Prescott":
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        core = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        core = "Haswell"
print(f"CPU GEMMs: OpenBLAS, {core} kernels")
