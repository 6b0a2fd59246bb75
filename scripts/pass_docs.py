#!/usr/bin/env python3
"""Writes docs/passes.md: every Cleave pass, from the Passes.td files.

The build runs this (target cleave-pass-docs) into build/docs/passes.md, and
test/Docs/passes.test fails when the checked-in docs/passes.md differs from
it, so the table cannot drift from the passes. After adding or changing a
pass, build, then copy build/docs/passes.md over docs/passes.md.

For each pass: its flag, the phase or target it serves, the .td file that
declares it, the .cpp file that defines it (the file that defines
GEN_PASS_DEF_<NAME>) and its lit test, found by the flag's name.
"""
import argparse
import os
import re
import subprocess
import sys

# (Passes.td relative to the source root, the section's title), in the
# order a compilation runs them.
GROUPS = [
    ("include/cleave/Sharding/Passes.td", "Sharding (after the import)"),
    ("include/cleave/Partition/Passes.td", "Partition"),
    ("dialects/Pipeline/Transforms/Passes.td", "Partition: pipeline stages"),
    ("include/cleave/Conversion/Passes.td", "Partition: collectives"),
    ("include/cleave/Fusion/Passes.td", "Fusion"),
    ("include/cleave/Bufferization/Passes.td", "Bufferization"),
    ("include/cleave/Codegen/Passes.td", "Code generation, both targets"),
    ("include/cleave/Codegen/CPU/Passes.td", "Code generation, CPU"),
    ("include/cleave/Codegen/CUDA/Passes.td", "Code generation, CUDA"),
]
SOURCE_DIRS = ["lib", "dialects"]


def pass_defs(td_text):
    """(def name, flag, summary) for each pass a .td file defines."""
    defs = []
    pattern = re.compile(
        r'^def (\w+)\s*:\s*(?:Interface)?Pass<"([\w-]+)"[^{]*\{(.*?)^\}',
        re.S | re.M)
    for m in pattern.finditer(td_text):
        body = m.group(3)
        s = re.search(r'let summary = ((?:"(?:[^"\\]|\\.)*"\s*)+);', body)
        summary = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', s.group(1))) \
            if s else ""
        defs.append((m.group(1), m.group(2), summary))
    return defs


def definitions(root):
    """GEN_PASS_DEF_<NAME> -> the source file that defines it."""
    found = {}
    for d in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if not f.endswith(".cpp"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path) as src:
                    for m in re.finditer(r"#define GEN_PASS_DEF_(\w+)",
                                         src.read()):
                        found[m.group(1)] = os.path.relpath(path, root)
    return found


def tests(root):
    """Test file stems (without -errors) -> the test files, under test/."""
    found = {}
    for dirpath, _, files in os.walk(os.path.join(root, "test")):
        for f in files:
            if f.endswith(".mlir"):
                stem = f[:-len(".mlir")]
                stem = stem[:-len("-errors")] if stem.endswith("-errors") \
                    else stem
                found.setdefault(stem, []).append(
                    os.path.relpath(os.path.join(dirpath, f), root))
    return found


def tblgen_doc(tblgen, includes, td):
    args = [tblgen, "-gen-pass-doc"] + [f"-I{i}" for i in includes] + [td]
    text = subprocess.run(args, check=True, capture_output=True,
                          text=True).stdout
    # tblgen's banner goes; its "###" headings sit under our sections.
    return re.sub(r"^<!--.*?-->\n*", "", text, flags=re.S).strip()


def render(root, tblgen, includes):
    defined = definitions(root)
    tested = tests(root)
    out = [
        "# Cleave's passes",
        "",
        "Generated from the `Passes.td` files by `scripts/pass_docs.py`, which",
        "the build runs (target `cleave-pass-docs`, into `build/docs/`);",
        "`test/Docs/passes.test` fails when this copy differs. Why each pass",
        "exists and how the phases use them: `docs/architecture.md`.",
        "",
        "| pass | phase or target | declared in | defined in | tests |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for td, title in GROUPS:
        with open(os.path.join(root, td)) as f:
            defs = pass_defs(f.read())
        for name, flag, summary in defs:
            src = defined.get(name.upper(), "?")
            # A flag is its dialect's or Cleave's prefix, then the test's
            # name: cleave-fuse-rows, fuse-rows.mlir.
            stem = flag.split("-", 1)[1]
            test = ", ".join(f"`{t}`" for t in sorted(tested.get(stem, [])))
            out.append(f"| `{flag}` | {title} | `{td}` | `{src}` | "
                       f"{test or '(end-to-end tests)'} |")
        sections += ["", f"## {title}", "", f"Declared in `{td}`.", "",
                     tblgen_doc(tblgen, includes + [os.path.join(root, "include"),
                                                    os.path.join(root, "dialects")],
                                os.path.join(root, td))]
    return "\n".join(out + sections) + "\n"


def check_mentioned(root, doc):
    with open(doc) as f:
        text = f.read()
    missing = []
    for td, _ in GROUPS:
        with open(os.path.join(root, td)) as f:
            missing += [flag for _, flag, _ in pass_defs(f.read())
                        if f"`{flag}`" not in text]
    for flag in missing:
        print(f"{doc}: pass '{flag}' is not mentioned", file=sys.stderr)
    return 1 if missing else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--tblgen", default="mlir-tblgen-22")
    parser.add_argument("-I", dest="includes", action="append", default=[])
    parser.add_argument("--out")
    parser.add_argument(
        "--check-mentioned", metavar="DOC",
        help="instead of writing: fail unless DOC names every pass's flag "
             "(docs/architecture.md says why each pass exists)")
    args = parser.parse_args()
    if args.check_mentioned:
        return check_mentioned(os.path.abspath(args.root), args.check_mentioned)
    if not args.out:
        parser.error("--out is required")
    text = render(os.path.abspath(args.root), args.tblgen, args.includes)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
