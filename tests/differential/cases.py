"""Writes the randomized differential cases of one op: per case a single-node model, its inputs in
tests/oracle/ort_run.mjs's manifest format, and masks of the output elements worth comparing.

  python3 cases.py OUT_DIR --op MatMulNBits [--count 200] [--case MatMulNBits_017 ...]
  python3 cases.py --list

Writes OUT_DIR/<case>/{model.onnx, in/, mask_<output>.bin} and OUT_DIR/cases.json, a list of
{name, op, dtype, tolerance, describe, masks[, reference]}; a case with
reference "float64" also has OUT_DIR/<case>/expected/ (its outputs, from the generator's float64
evaluation) and is not run through ONNX Runtime. Case <op>_<i> draws its parameters and data from a
generator seeded by (op, i), so it is the same whether written alone or with the others.
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np

import activations
import attention23
import gather_block_quantized
import gqa
import matmul_nbits
import mha
import moe
import norms
import rotary
from case_util import write_case

DEFAULT_COUNT = 200

GENERATORS = {}
for module in (matmul_nbits, gqa, mha, attention23, norms, rotary, gather_block_quantized, activations, moe):
    GENERATORS.update(module.GENERATORS)


def case_rng(op, index):
    return np.random.default_rng(zlib.crc32(f"{op}/{index}".encode()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--op", help="test name of the op (see --list)")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--case", action="append", default=[], help="write only this case (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the ops and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(GENERATORS))
        return 0
    if not args.out_dir or args.op not in GENERATORS:
        parser.error(f"want OUT_DIR and --op, one of: {', '.join(GENERATORS)}")
    names = [f"{args.op}_{i:03d}" for i in range(args.count)]
    wanted = set(args.case) if args.case else set(names)
    unknown = wanted - set(names)
    if unknown:
        parser.error(f"no such case: {', '.join(sorted(unknown))} (cases are {names[0]}..{names[-1]})")
    entries = []
    for index, name in enumerate(names):
        if name not in wanted:
            continue
        case = GENERATORS[args.op](case_rng(args.op, index))
        entry = write_case(os.path.join(args.out_dir, name), case)
        entry["name"] = name
        entries.append(entry)
    with open(os.path.join(args.out_dir, "cases.json"), "w") as f:
        json.dump(entries, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
