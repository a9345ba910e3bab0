#!/usr/bin/python3
"""Writes the single-op ONNX models of the kernel benchmark suite, with their inputs.

    /usr/bin/python3 tools/make_bench_models.py OUT_DIR

Both harnesses (bench/kernels_bench.cc for this runtime, bench/ort_bench.mjs for ONNX Runtime)
read OUT_DIR/manifest.json and feed the very same input bytes, so a ratio compares kernels, not
data. Every value comes from a fixed seed: two runs write identical files.

Cases (opset 17) and what their size means:
  matmul/MxKxN/{f32,f16,bf16}  Y[M,N] = A[M,K] @ B[K,N]; A is the graph input, B a constant
                               initializer (a weight), uniform in [-1, 1).
  add/N                        f32 Y[N] = A[N] + B[N], both graph inputs.
  gather/N                     f32 Y[N,64] = Gather(table[32000,64], idx[N]); N int64 indices,
                               uniform over the rows: an embedding lookup of N tokens.
  reduce_mean/N                f32 Y[N/1024,1] = ReduceMean(X[N/1024,1024], axes=[-1]): N
                               elements in rows of 1024 (norm-sized rows).
  softmax/W                    f32 Y[1,W] = Softmax(X[1,W], axis=-1): one vocabulary row
                               (32000: Llama-2, 151936: Qwen).
  call_overhead/add_1          f32 Add of one element: the fixed cost of one run call, which
                               dominates the smallest cases (for ORT it includes the Node binding).

manifest.json lists, per case: name, model file, inputs (name, dtype, shape, raw little-endian
data file) in the graph's input order, and the work one run does: `flops` (matmul) and `bytes`
(the least memory traffic: inputs, weights and output once each), for GFLOP/s and GB/s.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
GATHER_TABLE = (32000, 64)
REDUCE_COLS = 1024

# ONNX element type and the numpy dtype that holds its bits (bf16 is stored as its uint16 bits).
DTYPES = {
    "f32": (TensorProto.FLOAT, np.float32, "float32"),
    "f16": (TensorProto.FLOAT16, np.float16, "float16"),
    "bf16": (TensorProto.BFLOAT16, np.uint16, "bfloat16"),
    "i64": (TensorProto.INT64, np.int64, "int64"),
}


def to_storage(values, dtype):
    """f32 values -> the numpy array whose bytes are `dtype`'s encoding."""
    if dtype == "bf16":
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
        return bits.astype(np.uint16)
    return values.astype(DTYPES[dtype][1])


def constant(name, values, dtype):
    onnx_type = DTYPES[dtype][0]
    stored = to_storage(values, dtype)
    if dtype == "bf16":
        tensor = helper.make_tensor(name, onnx_type, stored.shape, stored.tobytes(), raw=True)
    else:
        tensor = numpy_helper.from_array(stored, name)
    return tensor


class Writer:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.cases = []

    def add(self, name, node, inputs, initializers, output_shape, output_dtype, flops=0,
            weight_bytes_read=None):
        """inputs: list of (input name, dtype key, f32/i64 numpy values). weight_bytes_read: the
        initializer bytes one run must read, when that is less than all of them (gather)."""
        stem = name.replace("/", "_")
        graph_inputs = [helper.make_tensor_value_info(n, DTYPES[d][0], v.shape) for n, d, v in inputs]
        output = helper.make_tensor_value_info("Y", DTYPES[output_dtype][0], output_shape)
        graph = helper.make_graph([node], stem, graph_inputs, [output], initializer=initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="onnx-genai make_bench_models")
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(self.out_dir, stem + ".onnx"))

        manifest_inputs = []
        for index, (input_name, dtype, values) in enumerate(inputs):
            data_file = f"{stem}.in{index}.bin"
            to_storage(values, dtype).tofile(os.path.join(self.out_dir, data_file))
            manifest_inputs.append({"name": input_name, "dtype": DTYPES[dtype][2],
                                    "shape": list(values.shape), "file": data_file})
        output_bytes = int(np.prod(output_shape)) * np.dtype(DTYPES[output_dtype][1]).itemsize
        if weight_bytes_read is None:
            weight_bytes_read = sum(len(t.raw_data) for t in initializers)
        traffic = sum(to_storage(v, d).nbytes for _, d, v in inputs) + output_bytes + weight_bytes_read
        self.cases.append({"name": name, "model": stem + ".onnx", "inputs": manifest_inputs,
                           "flops": flops, "bytes": traffic})

    def write_manifest(self):
        manifest = {"opset": OPSET, "generator": "tools/make_bench_models.py", "cases": self.cases}
        with open(os.path.join(self.out_dir, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")


def uniform(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def add_matmuls(writer, rng):
    for m, k, n in [(1, 256, 256), (32, 512, 512), (32, 1024, 1024)]:
        a = uniform(rng, (m, k))
        b = uniform(rng, (k, n))
        for dtype in ["f32", "f16", "bf16"]:
            node = helper.make_node("MatMul", ["A", "B"], ["Y"])
            writer.add(f"matmul/{m}x{k}x{n}/{dtype}", node, [("A", dtype, a)],
                       [constant("B", b, dtype)], [m, n], dtype, flops=2 * m * k * n)


def add_adds(writer, rng):
    for n in [1024, 262144, 4194304]:
        node = helper.make_node("Add", ["A", "B"], ["Y"])
        writer.add(f"add/{n}", node, [("A", "f32", uniform(rng, (n,))), ("B", "f32", uniform(rng, (n,)))],
                   [], [n], "f32")


def add_call_overhead(writer, rng):
    node = helper.make_node("Add", ["A", "B"], ["Y"])
    writer.add("call_overhead/add_1", node, [("A", "f32", uniform(rng, (1,))), ("B", "f32", uniform(rng, (1,)))],
               [], [1], "f32")


def add_gathers(writer, rng):
    table = uniform(rng, GATHER_TABLE)
    for n in [4096, 32768, 131072]:
        indices = rng.integers(0, GATHER_TABLE[0], size=(n,), dtype=np.int64)
        node = helper.make_node("Gather", ["table", "idx"], ["Y"], axis=0)
        rows_read = len(np.unique(indices)) * GATHER_TABLE[1] * 4
        writer.add(f"gather/{n}", node, [("idx", "i64", indices)], [constant("table", table, "f32")],
                   [n, GATHER_TABLE[1]], "f32", weight_bytes_read=rows_read)


def add_reduce_means(writer, rng):
    for n in [4096, 65536, 262144]:
        rows = n // REDUCE_COLS
        node = helper.make_node("ReduceMean", ["X"], ["Y"], axes=[-1], keepdims=1)
        writer.add(f"reduce_mean/{n}", node, [("X", "f32", uniform(rng, (rows, REDUCE_COLS)))], [],
                   [rows, 1], "f32")


def add_softmaxes(writer, rng):
    for width in [32000, 151936]:
        # Logit-like spread, so exp() sees a realistic range rather than values near 1.
        logits = (rng.standard_normal((1, width)) * 4.0).astype(np.float32)
        node = helper.make_node("Softmax", ["X"], ["Y"], axis=-1)
        writer.add(f"softmax/{width}", node, [("X", "f32", logits)], [], [1, width], "f32")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bench_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    writer = Writer(out_dir)
    rng = np.random.default_rng(20240601)
    # Order is part of the determinism: each family draws from the same generator in turn.
    for add_family in [add_matmuls, add_adds, add_gathers, add_reduce_means, add_softmaxes,
                       add_call_overhead]:
        add_family(writer, rng)
    writer.write_manifest()
    print(f"wrote {len(writer.cases)} models to {out_dir}")


if __name__ == "__main__":
    main()
