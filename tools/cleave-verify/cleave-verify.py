#!/usr/bin/env python3
"""cleave-verify: checks a Cleave program against ONNX Runtime on a model and,
when an output differs, names the first ONNX node whose result differs.

Usage:
  cleave-verify MODEL.onnx [cleave-compile flags, --mesh included]
                [--input NAME=FILE.npy]... [--rtol R] [--atol A] [--seed S]
                [--work DIR]

It compiles MODEL with the flags given, runs the program with cleave-run and
compares every graph output with ONNX Runtime's on the same inputs: inputs
given with --input, the others seeded random values of the compiled dtype and
shape (floats from a normal distribution; integers in [0, 2), but token ids
and other indices below the size of what they index, as the compiled program
states in its manifest). Programs compiled with --precision bf16|f16 are
judged against ONNX Runtime on the model with its GEMM operands rounded to
that type (the rule of scripts/check_model.py).

On a mismatch it compiles again with --tap-all (the result of every node
written as an extra output, gathered whole on the writing rank) and walks the
nodes in the graph's (topological) order to the first whose result differs
from ONNX Runtime's; where tapping every node hides the mismatch or finds
none (taps change what is fused), it bisects with one tap at a time along
the nodes the differing output is computed from. It reports that node's
name, op type and opset, the result's shape, max |diff|, the first differing
index with both values, and, for a program on several ranks, whether the
same node is right when compiled for one rank.

Exit status: 0 when every output matches, 1 with the report otherwise, 2 on
a usage error (a missing model, a bad flag, a program that does not compile).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, "@CLEAVE_PYTHON_DIR@")
import numerics  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    sys.exit(f"cleave-verify: needs the onnx and onnxruntime packages ({e})")

BIN = os.path.dirname(os.path.abspath(__file__))
NP_TYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64,
            "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
            "u8": np.uint8, "bool": np.bool_}
ONNX_TYPES = {"f32": onnx.TensorProto.FLOAT, "f16": onnx.TensorProto.FLOAT16,
              "bf16": onnx.TensorProto.BFLOAT16,
              "f64": onnx.TensorProto.DOUBLE, "i64": onnx.TensorProto.INT64,
              "i32": onnx.TensorProto.INT32, "i16": onnx.TensorProto.INT16,
              "i8": onnx.TensorProto.INT8, "u8": onnx.TensorProto.UINT8,
              "bool": onnx.TensorProto.BOOL}
# Flags of cleave-compile that lay the program out over ranks; dropped for
# the one-rank comparison. Those with a value take the next argument unless
# written NAME=VALUE.
LAYOUT_FLAGS = {"--mesh", "--shard-hints", "--shard-preset", "--microbatches",
                "--machine", "--device-memory"}


class UsageError(Exception):
    pass


def output_file_name(name):
    """The .npy file cleave-run writes for output `name`."""
    return re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode() + ".npy"


def run(command, what):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise UsageError(f"{what} failed:\n{result.stderr.strip()}")
    return result


def compile_model(model_path, flags, bundle, extra=()):
    run([os.path.join(BIN, "cleave-compile"), model_path, "--quiet", "-o",
         bundle, *flags, *extra], "cleave-compile")
    with open(os.path.join(bundle, "manifest.json")) as f:
        return json.load(f)


def run_bundle(bundle, inputs, work):
    out = tempfile.mkdtemp(prefix="out-", dir=work)
    files = []
    for name, array in inputs.items():
        path = os.path.join(work, "input-" + output_file_name(name))
        np.save(path, array)
        files += ["--input", f"{name}={path}"]
    run([os.path.join(BIN, "cleave-run"), bundle, *files, "--output-dir", out],
        "cleave-run")
    return out


def make_inputs(manifest, given, seed):
    """Given inputs as they are; the others seeded random, index inputs
    below what they index."""
    rng = np.random.default_rng(seed)
    highs = {}
    for bound in manifest.get("index_bounds", []):
        highs[bound["input"]] = min(highs.get(bound["input"], bound["high"]),
                                    bound["high"])
    inputs = {}
    for entry in manifest["inputs"]:
        name, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
        if name in given:
            inputs[name] = given[name]
            continue
        if dtype not in NP_TYPES:
            raise UsageError(f"input '{name}' is {dtype}: give it with --input")
        np_type = NP_TYPES[dtype]
        if dtype == "bool":
            inputs[name] = rng.integers(0, 2, shape).astype(np.bool_)
        elif np.issubdtype(np_type, np.integer):
            inputs[name] = rng.integers(0, highs.get(name, 2), shape).astype(np_type)
        else:
            inputs[name] = rng.standard_normal(shape).astype(np_type)
    return inputs


def with_outputs(model, names, manifest):
    """A copy of `model` whose graph outputs are `names`, typed from shape
    inference or, failing that, from the program's manifest."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {v.name: v for v in inferred.graph.value_info}
    except Exception:  # inference is best effort; the manifest has types
        known = {}
    known.update({o.name: o for o in model.graph.output})
    taps = {o["name"][len("tap:"):]: o for o in manifest["outputs"]
            if o["name"].startswith("tap:")}
    outputs = []
    for name in names:
        if name in taps:
            t = taps[name]
            outputs.append(onnx.helper.make_tensor_value_info(
                name, ONNX_TYPES[t["dtype"]], t["shape"]))
        elif name in known:
            outputs.append(known[name])
    del copy.graph.output[:]
    copy.graph.output.extend(outputs)
    return copy


def reference(model, names, inputs, manifest):
    """ONNX Runtime's values of `names` (graph outputs or node results)."""
    probe = with_outputs(model, names, manifest)
    feed = {i.name: inputs[i.name] for i in model.graph.input if i.name in inputs}
    wanted = [o.name for o in probe.graph.output]
    try:
        session = ort.InferenceSession(probe.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        return dict(zip(wanted, session.run(wanted, feed)))
    except Exception as e:  # ORT's own errors: no reference to compare with
        raise UsageError(f"ONNX Runtime cannot run the model: {e}") from e


class Judge:
    """Whether a program's value matches the reference: elementwise
    tolerances in float32, the rounded-operand rule under --precision."""

    def __init__(self, model, inputs, manifest, precision, rtol, atol):
        self.model, self.inputs, self.manifest = model, inputs, manifest
        self.precision, self.rtol, self.atol = precision, rtol, atol
        self.rounded_model = None
        if precision in numerics.UNITS:
            import check_model  # noqa: E402  (scripts/, for its rule)
            self.rounded_model = check_model.round_gemm_operands(model, precision)
        self.cache = {}

    def references(self, names, manifest=None):
        manifest = manifest or self.manifest
        missing = [n for n in names if n not in self.cache]
        if missing:
            plain = reference(self.model, missing, self.inputs, manifest)
            rounded = (reference(self.rounded_model, missing, self.inputs, manifest)
                       if self.rounded_model is not None else {})
            for n in missing:
                if n in plain:
                    self.cache[n] = (plain[n], rounded.get(n))
        return {n: self.cache[n] for n in names if n in self.cache}

    def compare(self, actual, ref):
        """(ok, max |diff|, first differing index or None)."""
        plain, rounded = ref
        # Where rounding the GEMM operands changes nothing yet (before the
        # first GEMM), the float32 rule judges.
        if rounded is not None and np.array_equal(rounded, plain):
            rounded = None
        expected = rounded if rounded is not None else plain
        actual = np.asarray(actual)
        if actual.shape != expected.shape:
            return False, float("inf"), None
        if actual.dtype == np.bool_ or np.issubdtype(actual.dtype, np.integer):
            bad = actual != expected
            worst = float(np.abs(actual.astype(np.float64) -
                                 expected.astype(np.float64)).max()) if actual.size else 0.0
            return not bad.any(), worst, first_index(bad)
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        diff = np.abs(a - e)
        worst = float(np.nanmax(diff)) if diff.size else 0.0
        if rounded is not None:
            ok, _ = numerics.rounded_gemms(actual, rounded, plain, self.precision)
            scale = np.abs(e).max() if e.size else 0.0
            bad = ~(diff <= numerics.UNITS[self.precision] * scale)
        else:
            bad = ~(diff <= self.atol + self.rtol * np.abs(e))
            ok = not bad.any()
        bad |= np.isnan(a) != np.isnan(e)
        return ok and not bad.any(), worst, first_index(bad)


def first_index(bad):
    where = np.argwhere(bad)
    return tuple(int(i) for i in where[0]) if len(where) else None


def opset_of(model, node):
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    for o in model.opset_import:
        if (o.domain if o.domain != "ai.onnx" else "") == domain:
            return o.version
    return 0


def node_names(model):
    """Each node's name as cleave-compile knows it: unnamed nodes OP#INDEX."""
    return [n.name or f"{n.op_type}#{i}" for i, n in enumerate(model.graph.node)]


def ancestors(model, value):
    """Indices of the nodes `value` is computed from, in graph order."""
    producer = {o: i for i, n in enumerate(model.graph.node) for o in n.output}
    seen, stack = set(), [value]
    while stack:
        v = stack.pop()
        i = producer.get(v)
        if i is None or i in seen:
            continue
        seen.add(i)
        stack.extend(x for x in model.graph.node[i].input if x)
    return sorted(seen)


def tapped_values(out, manifest):
    values = {}
    for o in manifest["outputs"]:
        if o["name"].startswith("tap:"):
            values[o["name"][4:]] = np.load(os.path.join(out, output_file_name(o["name"])))
    return values


def first_diverging(model, judge, values, manifest, only=None):
    """The first node (in graph order) with a tapped result that differs:
    (index, output name, (ok, worst, where)) or None."""
    refs = judge.references(list(values), manifest)
    for i, node in enumerate(model.graph.node):
        if only is not None and i not in only:
            continue
        for output in node.output:
            if output in values and output in refs:
                verdict = judge.compare(values[output], refs[output])
                if not verdict[0]:
                    return i, output, verdict
    return None


def describe(model, index, output, verdict, values, refs, judge):
    node = model.graph.node[index]
    ok, worst, where = verdict
    actual = np.asarray(values[output])
    plain, rounded = refs[output]
    expected = rounded if rounded is not None else plain
    name = node_names(model)[index]
    domain = node.domain + "." if node.domain not in ("", "ai.onnx") else ""
    lines = [f"first diverging node: '{name}' ({domain}{node.op_type}, opset "
             f"{opset_of(model, node)}), node {index} of {len(model.graph.node)}",
             f"  result '{output}': shape {list(actual.shape)}, max |diff| {worst:.6g}"]
    if where is not None:
        lines.append(f"  first differing index {list(where)}: Cleave "
                     f"{actual[where].item()!r}, ONNX Runtime {expected[where].item()!r}")
    elif actual.shape != expected.shape:
        lines.append(f"  shape differs: ONNX Runtime {list(expected.shape)}")
    return "\n".join(lines)


def one_rank_flags(flags):
    kept, skip = [], False
    for flag in flags:
        if skip:
            skip = False
            continue
        key = flag.split("=", 1)[0]
        if key in LAYOUT_FLAGS:
            skip = "=" not in flag
            continue
        kept.append(flag)
    return kept


def main(argv):
    parser = argparse.ArgumentParser(
        prog="cleave-verify", description=__doc__.split("\n\n")[0],
        epilog="Any other flag is passed to cleave-compile.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--input", action="append", default=[],
                        metavar="NAME=FILE.npy", help="an input's values")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random inputs (default 0)")
    parser.add_argument("--work", help="keep the bundles and outputs here")
    args, flags = parser.parse_known_args(argv)
    if not os.path.isfile(args.model):
        parser.error(f"no model '{args.model}'")
    for flag in flags:
        if flag in ("-o", "--compile-to") or flag.startswith(("-o=", "--compile-to=")):
            parser.error(f"{flag} is cleave-verify's to choose")
    given = {}
    for pair in args.input:
        name, sep, path = pair.partition("=")
        if not sep:
            parser.error(f"--input {pair}: expected NAME=FILE.npy")
        try:
            given[name] = np.load(path)
        except (OSError, ValueError) as e:
            parser.error(f"--input {pair}: {e}")
    precision = "f32"
    for i, flag in enumerate(flags):
        if flag.startswith("--precision="):
            precision = flag.split("=", 1)[1]
        elif flag == "--precision" and i + 1 < len(flags):
            precision = flags[i + 1]

    work = args.work or tempfile.mkdtemp(prefix="cleave-verify-")
    os.makedirs(work, exist_ok=True)
    try:
        return verify(args, flags, given, precision, work)
    except UsageError as e:
        print(f"cleave-verify: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def verify(args, flags, given, precision, work):
    model = onnx.load(args.model)
    bundle = os.path.join(work, "program")
    manifest = compile_model(args.model, flags, bundle)
    inputs = make_inputs(manifest, given, args.seed)
    judge = Judge(model, inputs, manifest, precision, args.rtol, args.atol)
    out = run_bundle(bundle, inputs, work)
    refs = judge.references([o.name for o in model.graph.output])
    failing = []
    for o in model.graph.output:
        actual = np.load(os.path.join(out, output_file_name(o.name)))
        ok, worst, _ = judge.compare(actual, refs[o.name])
        print(f"output '{o.name}': {'matches' if ok else 'DIFFERS'} "
              f"(max |diff| {worst:.3g})")
        if not ok:
            failing.append(o.name)
    ranks = manifest.get("ranks", 1)
    if not failing:
        print(f"cleave-verify: every output matches ONNX Runtime "
              f"({ranks} rank{'s' if ranks > 1 else ''}, {precision})")
        return 0

    # Where does it start? Every node tapped first.
    names = node_names(model)
    found, how = None, "tapping every node"
    tapped = os.path.join(work, "tapped")
    tap_manifest = compile_model(args.model, flags, tapped, ["--tap-all"])
    values = tapped_values(run_bundle(tapped, inputs, work), tap_manifest)
    hit = first_diverging(model, judge, values, tap_manifest)
    if hit:
        found = (hit, values, tap_manifest)
    else:
        # The taps hid it or it lies between them: one tap at a time along
        # what the first differing output is computed from.
        how = "bisecting with one tap at a time"
        chain = ancestors(model, failing[0])
        lo, hi, best = 0, len(chain) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            index = chain[mid]
            single = os.path.join(work, f"tap-{mid}")
            m = compile_model(args.model, flags, single, ["--tap", names[index]])
            vals = tapped_values(run_bundle(single, inputs, work), m)
            hit = first_diverging(model, judge, vals, m, only={index})
            if hit:
                best, hi = (hit, vals, m), mid - 1
            else:
                lo = mid + 1
        found = best
    if not found:
        print("cleave-verify: outputs differ, but no node's tapped result "
              "does (the difference appears only where nothing is tapped)")
        return 1
    (index, output, verdict), values, m = found
    refs = judge.references([output], m)
    print(describe(model, index, output, verdict, values, refs, judge))
    print(f"  found by {how}")
    if ranks > 1:
        single = os.path.join(work, "one-rank")
        m1 = compile_model(args.model, one_rank_flags(flags), single,
                           ["--tap", names[index]])
        vals = tapped_values(run_bundle(single, inputs, work), m1)
        ok = output in vals and judge.compare(vals[output], refs[output])[0]
        print(f"  on one rank the same node is {'right' if ok else 'also wrong'}"
              f" (the plan has {ranks} ranks)")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
