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
  matmul_nbits/MxKxN/bB/accL   com.microsoft MatMulNBits, f32 Y[M,N] = A[M,K] x B^T: B 4-bit,
                               block B along K, symmetric (no zero points: the model builder's
                               default), f32 scales; accuracy_level L (0: f32 activations, 4:
                               ORT quantises A to int8 per block). KxN 4096x4096 (attention
                               projection), 4096x14336 (MLP up/gate), 14336x4096 (MLP down).
                               The four models of one weight matrix share its external data
                               file (*.weights.bin).
  gqa/HqxHkvxD/ctxL            com.microsoft GroupQueryAttention decode step, f32, batch 1: one
                               new token attends to L positions (L - 1 in past_key/past_value
                               [1, Hkv, L - 1, D], the new one from key/value), present_key/value
                               [1, Hkv, L, D] written as separate outputs (model-builder CPU
                               models do not share the past and present buffers); no rotary.
  matmul_nbits_rows/MxKxN/bB/accL
                               MatMulNBits as above for few rows (M 1, 2, 4, 8, 16: speculative
                               verify steps, small engine batches), where the weights should be
                               read once for all rows: KxN 4096x4096, and the default model's
                               (models/debian-prose-11m: qkv 320x448, down 864x320, lm_head
                               320x8192), all block 32. Own weight files.
  qmoe/MxHxI/eEkK/int4bB       com.microsoft QMoE, f32: M tokens through E experts of hidden H,
                               inter I, top K (a Qwen3-30B-A3B layer scaled down), int4 codes in
                               blocks of B (int4bB) or one scale per row (int4row), fused
                               SwiGLU; GB/s counts the chosen experts only.

manifest.json lists, per case: name, model file, inputs (name, dtype, shape, raw little-endian
data file) in the graph's input order, and the work one run does: `flops` (FLOP-bound matmuls)
and `bytes` (the least memory traffic: inputs, weights and outputs once each), for GFLOP/s and
GB/s.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

OPSET = 17
GATHER_TABLE = (32000, 64)
REDUCE_COLS = 1024

# ONNX element type and the numpy dtype that holds its bits (bf16 is stored as its uint16 bits).
DTYPES = {
    "f32": (TensorProto.FLOAT, np.float32, "float32"),
    "f16": (TensorProto.FLOAT16, np.float16, "float16"),
    "bf16": (TensorProto.BFLOAT16, np.uint16, "bfloat16"),
    "i64": (TensorProto.INT64, np.int64, "int64"),
    "i32": (TensorProto.INT32, np.int32, "int32"),
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
            weight_bytes_read=None, extra_outputs=()):
        """inputs: list of (input name, dtype key, numpy values[, declared shape]).
        weight_bytes_read: the initializer bytes one run must read, when that is less than all of
        them (gather) or they are external (matmul_nbits).
        Output "Y" has output_shape; extra_outputs lists further (name, dtype key, shape, shape as
        the graph declares it: symbolic dims allowed)."""
        stem = name.replace("/", "_")
        graph_inputs = [helper.make_tensor_value_info(i[0], DTYPES[i[1]][0], i[3] if len(i) > 3 else i[2].shape)
                        for i in inputs]
        outputs = [("Y", output_dtype, output_shape, output_shape), *extra_outputs]
        graph_outputs = [helper.make_tensor_value_info(n, DTYPES[d][0], declared) for n, d, _, declared in outputs]
        graph = helper.make_graph([node], stem, graph_inputs, graph_outputs, initializer=initializers)
        opsets = [helper.make_opsetid("", OPSET)]
        if node.domain:
            opsets.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(graph, opset_imports=opsets, producer_name="onnx-genai make_bench_models")
        model.ir_version = 8
        model_path = os.path.join(self.out_dir, stem + ".onnx")
        onnx.save(model, model_path)
        onnx.checker.check_model(model_path)  # by path: external data resolves next to the model

        manifest_inputs = []
        for index, (input_name, dtype, values, *_) in enumerate(inputs):
            data_file = f"{stem}.in{index}.bin"
            to_storage(values, dtype).tofile(os.path.join(self.out_dir, data_file))
            manifest_inputs.append({"name": input_name, "dtype": DTYPES[dtype][2],
                                    "shape": list(values.shape), "file": data_file})
        output_bytes = sum(int(np.prod(shape)) * np.dtype(DTYPES[d][1]).itemsize for _, d, shape, _ in outputs)
        if weight_bytes_read is None:
            weight_bytes_read = sum(len(t.raw_data) for t in initializers)
        traffic = sum(to_storage(v, d).nbytes for _, d, v, *_ in inputs) + output_bytes + weight_bytes_read
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


def external_initializers(out_dir, file_name, arrays):
    """Writes `arrays` (name -> numpy array) into one raw file, each at a 64-byte-aligned offset,
    and returns initializers that reference it: models sharing weights share the file."""
    tensors = []
    with open(os.path.join(out_dir, file_name), "wb") as f:
        for name, values in arrays.items():
            f.write(b"\0" * (-f.tell() % 64))
            offset = f.tell()
            f.write(values.tobytes())
            tensor = numpy_helper.from_array(values, name)
            external_data_helper.set_external_data(tensor, file_name, offset, values.nbytes)
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            tensors.append(tensor)
    return tensors


def add_matmul_nbits(writer, rng):
    bits = 4
    for k, n in [(4096, 4096), (4096, 14336), (14336, 4096)]:
        for block in [32, 128]:
            blocks = (k + block - 1) // block
            codes = rng.integers(0, 256, size=(n, blocks, block * bits // 8), dtype=np.uint8)
            # Signed scales, as symmetric quantisers write them (the sign of the block's extreme).
            scales = rng.uniform(-0.02, 0.02, size=(n * blocks,)).astype(np.float32)
            weights_file = f"matmul_nbits_{k}x{n}_b{block}.weights.bin"
            initializers = external_initializers(writer.out_dir, weights_file, {"B": codes, "scales": scales})
            for m in [1, 32]:
                a = uniform(rng, (m, k))
                for level in [0, 4]:
                    node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], domain="com.microsoft",
                                            K=k, N=n, bits=bits, block_size=block, accuracy_level=level)
                    # M = 1 streams the weights once (GB/s says more); M = 32 is FLOP-bound.
                    writer.add(f"matmul_nbits/{m}x{k}x{n}/b{block}/acc{level}", node, [("A", "f32", a)],
                               initializers, [m, n], "f32", flops=2 * m * k * n if m > 1 else 0,
                               weight_bytes_read=codes.nbytes + scales.nbytes)


def add_matmul_nbits_rows(writer, rng):
    bits, block = 4, 32
    for k, n in [(4096, 4096), (320, 448), (864, 320), (320, 8192)]:
        blocks = (k + block - 1) // block
        codes = rng.integers(0, 256, size=(n, blocks, block * bits // 8), dtype=np.uint8)
        scales = rng.uniform(-0.02, 0.02, size=(n * blocks,)).astype(np.float32)
        weights_file = f"matmul_nbits_rows_{k}x{n}_b{block}.weights.bin"
        initializers = external_initializers(writer.out_dir, weights_file, {"B": codes, "scales": scales})
        for m in [1, 2, 4, 8, 16]:
            a = uniform(rng, (m, k))
            for level in [0, 4]:
                node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], domain="com.microsoft",
                                        K=k, N=n, bits=bits, block_size=block, accuracy_level=level)
                writer.add(f"matmul_nbits_rows/{m}x{k}x{n}/b{block}/acc{level}", node, [("A", "f32", a)],
                           initializers, [m, n], "f32", weight_bytes_read=codes.nbytes + scales.nbytes)


def add_group_query_attentions(writer, rng):
    for heads, kv_heads, head_size in [(32, 8, 128), (14, 2, 64)]:
        for context in [128, 2048, 8192]:
            past = context - 1
            # Sequence lengths declared symbolic, as in model-builder graphs: ORT's shape inference
            # otherwise takes present's length from past's and warns on every run.
            declared_past = [1, kv_heads, "past_sequence_length", head_size]
            inputs = [
                ("query", "f32", uniform(rng, (1, 1, heads * head_size))),
                ("key", "f32", uniform(rng, (1, 1, kv_heads * head_size))),
                ("value", "f32", uniform(rng, (1, 1, kv_heads * head_size))),
                ("past_key", "f32", uniform(rng, (1, kv_heads, past, head_size)), declared_past),
                ("past_value", "f32", uniform(rng, (1, kv_heads, past, head_size)), declared_past),
                # seqlens_k: index of the last valid position (total length - 1), per batch entry.
                ("seqlens_k", "i32", np.array([context - 1], dtype=np.int32)),
                ("total_sequence_length", "i32", np.array(context, dtype=np.int32)),
            ]
            node = helper.make_node("GroupQueryAttention", [i[0] for i in inputs],
                                    ["Y", "present_key", "present_value"], domain="com.microsoft",
                                    num_heads=heads, kv_num_heads=kv_heads)
            present = [1, kv_heads, context, head_size]
            declared = [1, kv_heads, "total_sequence_length", head_size]
            writer.add(f"gqa/{heads}x{kv_heads}x{head_size}/ctx{context}", node, inputs, [],
                       [1, 1, heads * head_size], "f32",
                       extra_outputs=[("present_key", "f32", present, declared),
                                      ("present_value", "f32", present, declared)])


def add_qmoe(writer, rng):
    """A Qwen3-30B-A3B-like MoE layer scaled down: hidden 2048, inter 768, 128 experts, top-8,
    int4 codes with f32 scales in blocks of 32 or one per row, fused interleaved SwiGLU (fc1 holds
    gate and up)."""
    hidden, inter, experts, top_k, bits = 2048, 768, 128, 8, 4
    for block in [32, 0]:  # 0: one scale per row
        arrays = {}
        for name, n, k in [("fc1", 2 * inter, hidden), ("fc2", hidden, inter)]:
            arrays[f"{name}_experts_weights"] = rng.integers(0, 256, size=(experts, n, k * bits // 8), dtype=np.uint8)
            scale_shape = (experts, n, k // block) if block else (experts, n)
            arrays[f"{name}_scales"] = rng.uniform(-0.02, 0.02, size=scale_shape).astype(np.float32)
        suffix = f"b{block}" if block else "row"
        initializers = external_initializers(writer.out_dir, f"qmoe_qwen3_{suffix}.weights.bin", arrays)
        per_expert = sum(a.nbytes for a in arrays.values()) // experts
        block_attr = {"block_size": block} if block else {}
        for m in [1, 16]:
            x = uniform(rng, (m, hidden))
            logits = uniform(rng, (m, experts))
            chosen = {int(e) for row in logits for e in np.argsort(-row)[:top_k]}
            node = helper.make_node("QMoE", ["input", "router_probs", "fc1_experts_weights", "fc1_scales", "",
                                             "fc2_experts_weights", "fc2_scales"], ["Y"], domain="com.microsoft",
                                    k=top_k, activation_type="swiglu", swiglu_fusion=1, expert_weight_bits=bits,
                                    normalize_routing_weights=1, **block_attr)
            # Only the chosen experts' weights are read (GB/s); FLOPs are those of the routed rows.
            writer.add(f"qmoe/{m}x{hidden}x{inter}/e{experts}k{top_k}/int4{suffix}", node,
                       [("input", "f32", x), ("router_probs", "f32", logits)], initializers, [m, hidden], "f32",
                       flops=2 * m * top_k * 3 * hidden * inter if m > 1 else 0,
                       weight_bytes_read=len(chosen) * per_expert)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bench_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    writer = Writer(out_dir)
    rng = np.random.default_rng(20240601)
    # Order is part of the determinism: each family draws from the same generator in turn (new
    # families go last, so the older ones keep their bytes).
    for add_family in [add_matmuls, add_adds, add_gathers, add_reduce_means, add_softmaxes,
                       add_call_overhead, add_matmul_nbits, add_group_query_attentions, add_qmoe,
                       add_matmul_nbits_rows]:
        add_family(writer, rng)
    writer.write_manifest()
    print(f"wrote {len(writer.cases)} models to {out_dir}")


if __name__ == "__main__":
    main()
