#!/usr/bin/env python3
"""Turns ONNX's textual syntax into a binary model, for importer tests.

Usage: onnx_from_text.py INPUT.onnxtxt -o OUT.onnx

Lines starting with '#' (RUN and CHECK lines) are comments to ONNX's parser.
"""
import argparse
import sys

import onnx
import onnx.parser


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.input, encoding="utf-8") as f:
        text = f.read()
    try:
        model = onnx.parser.parse_model(text)
    except onnx.parser.ParseError as e:
        print(f"onnx_from_text: {args.input}: {e}", file=sys.stderr)
        return 1
    onnx.save(model, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
