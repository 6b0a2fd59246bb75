#!/usr/bin/env python3
"""Says whether two MLIR files hold the same IR up to the names of values.

Usage: same_ir.py A.mlir B.mlir

Value names (%arg0, %cst_12, ...) are numbered by the printer in the order
it meets them, so two modules built by different routes print the same
only up to these names; each file's names are replaced by their order of
first appearance before comparing line by line. Prints "same IR: yes", or
"same IR: NO" with the first line that differs.
"""
import re
import sys

NAME = re.compile(r"%[A-Za-z0-9_$.-]+")


def normalized(path):
    names = {}
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            lines.append(NAME.sub(
                lambda m: names.setdefault(m.group(0), f"%v{len(names)}"),
                line.rstrip("\n")))
    return lines


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = normalized(sys.argv[1]), normalized(sys.argv[2])
    for number, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            print(f"same IR: NO (line {number}:\n  {x}\n  {y})")
            return 1
    if len(a) != len(b):
        print(f"same IR: NO ({len(a)} lines against {len(b)})")
        return 1
    print(f"same IR: yes ({len(a)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
