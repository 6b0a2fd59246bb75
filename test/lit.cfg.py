# Cleave's lit suite: importer, driver, conformance and (later) pass tests.
import os
import shutil
import tempfile
import subprocess

import lit.formats

config.name = "Cleave"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")
config.excludes = ["lit-tools", "CMakeLists.txt", "README.md", "make_inputs.py",
                   "check_mlp.py", "run-exclusions.txt", "compare_with_ort.py"]

bin_dir = os.path.join(config.cleave_obj_root, "bin")
config.environment["PATH"] = os.pathsep.join(
    [bin_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])]
)
tools = os.path.join(config.test_source_root, "lit-tools")
config.substitutions.append(
    ("%onnx-from-text", f"{config.python_executable} {tools}/onnx_from_text.py")
)
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%bin", bin_dir))
config.substitutions.append(("%lit_tools", tools))
conformance_dir = os.environ.get(
    "CLEAVE_CONFORMANCE_DIR",
    os.path.join(os.path.dirname(config.cleave_src_root), "shared", "onnx-node-tests"))
config.substitutions.append(("%conformance_dir", conformance_dir))
if os.path.isdir(conformance_dir):
    config.available_features.add("conformance-cases")

# The packed CPU GEMM runs by default only with AVX-512.
with open("/proc/cpuinfo") as cpuinfo:
    if "avx512f" in cpuinfo.read().split():
        config.available_features.add("avx512f")

# bfloat16 GEMMs run on AMX's tiles where the CPU has them and the operating
# system grants them: asked of the runtime itself.
amx_probe = os.path.join(bin_dir, "cleave-rt-amx-gemm-test")
if os.path.exists(amx_probe):
    probe = subprocess.run([amx_probe, "--probe"], capture_output=True,
                           text=True, env=dict(os.environ, CLEAVE_AMX="1"))
    if probe.stdout.strip() == "kernel: AMX":
        config.available_features.add("amx")

# The CUDA runtime pieces are built where the CUDA toolkit is installed; GPU
# checks run only where a GPU answers.
if os.path.exists(os.path.join(bin_dir, "cleave-gpu-gemm-check")):
    config.available_features.add("cuda-toolkit")
if shutil.which("nvidia-smi") and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0:
    config.available_features.add("gpu")

# Hosts made of network namespaces (test/e2e/multi-host.test) need iproute2
# and the right to make namespaces, network and mount (each host gets a
# folder of its own): probed by making and removing them. Where it cannot,
# the test reports itself unsupported (lit names the feature).
probe_ns = f"cleave-probe-{os.getpid()}"
if shutil.which("ip") and shutil.which("unshare") and shutil.which(
        "nsenter") and subprocess.run(
        ["ip", "netns", "add", probe_ns], capture_output=True).returncode == 0:
    # A bridge, made where the test makes its own: inside a namespace.
    bridge = subprocess.run(
        ["ip", "netns", "exec", probe_ns, "ip", "link", "add", "cbprobe",
         "type", "bridge"], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe_ns], capture_output=True)
    with tempfile.TemporaryDirectory() as private:
        tmpfs = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "mount", "-t",
             "tmpfs", "none", private], capture_output=True).returncode == 0
    if bridge and tmpfs:
        config.available_features.add("netns")
