#!/usr/bin/python3
"""Writes a small decoder-only transformer built from standard ONNX ops (opset 17).

    /usr/bin/python3 tools/build_demo_model.py OUT_DIR [--seed N]

writes OUT_DIR/demo_decoder.onnx (float32 weights) and OUT_DIR/demo_decoder_f16w.onnx (the same
weights stored as float16 and Cast to float32 in the graph, as fp16 exports of fp32 compute do).

The graph is shaped like a torch.onnx GPT-2 style export, shape arithmetic included:

    input_ids [batch, seq] int64
      -> Gather(token embedding [vocab, hidden]) + Gather(position embedding, Range(0, seq))
      -> 2 x block:
           x += Wo . attention(LayerNorm(x))   4 heads of 16, causal mask from
                                               ConstantOfShape([seq, seq], min) -> Trilu(k=1)
           x += W2 . act(W1 . LayerNorm(x))    act: SiLU (x * Sigmoid(x)) in block 0,
                                               exact GELU (0.5 x (1 + Erf(x / sqrt 2))) in block 1
      -> LayerNorm -> MatMul(lm head) -> logits [batch, seq, vocab] float32

Weights are seeded normals scaled by 1/sqrt(fan_in), so activations stay O(1), attention is far
from uniform and the logits of a position are well separated (argmax comparisons are meaningful).
The same seed always writes the same bytes.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = 1000
HIDDEN = 64
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
FFN = 4 * HIDDEN
LAYERS = 2
MAX_POSITIONS = 128
OPSET = 17


class GraphBuilder:
    """Collects nodes and initializers; weights go through `weight` so one flag picks fp16 storage."""

    def __init__(self, rng, f16_weights):
        self.rng = rng
        self.f16_weights = f16_weights
        self.nodes = []
        self.initializers = []

    def node(self, op, inputs, output, **attributes):
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def constant(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, scale):
        values = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        if not self.f16_weights:
            return self.constant(name, values)
        self.constant(name + "_f16", values.astype(np.float16))
        return self.node("Cast", [name + "_f16"], name, to=TensorProto.FLOAT)

    def layer_norm(self, name, x):
        scale = self.weight(name + ".weight", [HIDDEN], 0.1)
        bias = self.weight(name + ".bias", [HIDDEN], 0.1)
        # gamma = 1 + noise keeps the normalised signal at unit scale.
        gamma = self.node("Add", [scale, self.constant(name + ".one", np.float32(1))], name + ".gamma")
        return self.node("LayerNormalization", [x, gamma, bias], name + ".out", axis=-1, epsilon=1e-5)

    def linear(self, name, x, fan_in, fan_out, bias=True):
        w = self.weight(name + ".weight", [fan_in, fan_out], 1 / np.sqrt(fan_in))
        y = self.node("MatMul", [x, w], name + ".matmul")
        if not bias:
            return y
        b = self.weight(name + ".bias", [fan_out], 0.02)
        return self.node("Add", [y, b], name + ".out")


def split_heads(g, name, x, batch_seq):
    """[batch, seq, hidden] -> [batch, heads, seq, head_dim] via Reshape(Concat(Shape[0:2], [h, d]))."""
    shape = g.node("Concat", [batch_seq, g.constant(name + ".heads_shape", np.array([HEADS, HEAD_DIM], np.int64))],
                   name + ".shape", axis=0)
    x4 = g.node("Reshape", [x, shape], name + ".reshape")
    return g.node("Transpose", [x4], name + ".heads", perm=[0, 2, 1, 3])


def attention(g, name, x, batch_seq, mask):
    q = split_heads(g, name + ".q", g.linear(name + ".q_proj", x, HIDDEN, HIDDEN), batch_seq)
    k = split_heads(g, name + ".k", g.linear(name + ".k_proj", x, HIDDEN, HIDDEN), batch_seq)
    v = split_heads(g, name + ".v", g.linear(name + ".v_proj", x, HIDDEN, HIDDEN), batch_seq)
    k_t = g.node("Transpose", [k], name + ".k_t", perm=[0, 1, 3, 2])
    scores = g.node("MatMul", [q, k_t], name + ".scores")
    scaled = g.node("Div", [scores, g.constant(name + ".sqrt_d", np.float32(np.sqrt(HEAD_DIM)))], name + ".scaled")
    masked = g.node("Add", [scaled, mask], name + ".masked")
    probs = g.node("Softmax", [masked], name + ".probs", axis=-1)
    context = g.node("MatMul", [probs, v], name + ".context")
    merged = g.node("Transpose", [context], name + ".merged", perm=[0, 2, 1, 3])
    flat = g.node("Reshape", [merged, g.constant(name + ".flat_shape", np.array([0, 0, HIDDEN], np.int64))],
                  name + ".flat")
    return g.linear(name + ".o_proj", flat, HIDDEN, HIDDEN)


def mlp(g, name, x, activation):
    h = g.linear(name + ".fc1", x, HIDDEN, FFN)
    if activation == "silu":
        a = g.node("Mul", [h, g.node("Sigmoid", [h], name + ".sigmoid")], name + ".act")
    else:
        erf = g.node("Erf", [g.node("Div", [h, g.constant(name + ".sqrt2", np.float32(np.sqrt(2)))], name + ".h_s")],
                     name + ".erf")
        one_plus = g.node("Add", [erf, g.constant(name + ".one", np.float32(1))], name + ".one_plus")
        half_h = g.node("Mul", [h, g.constant(name + ".half", np.float32(0.5))], name + ".half_h")
        a = g.node("Mul", [half_h, one_plus], name + ".act")
    return g.linear(name + ".fc2", a, FFN, HIDDEN)


def embeddings(g, ids, seq_1d):
    """Token + learned position embedding; positions = Range(0, seq, 1)."""
    tokens = g.node("Gather", [g.weight("wte", [VOCAB, HIDDEN], 1.0), ids], "embed.tokens", axis=0)
    seq_scalar = g.node("Squeeze", [seq_1d, g.constant("embed.axis0", np.array([0], np.int64))], "embed.seq")
    positions = g.node("Range", [g.constant("embed.start", np.int64(0)), seq_scalar,
                                 g.constant("embed.step", np.int64(1))], "embed.positions")
    pos = g.node("Gather", [g.weight("wpe", [MAX_POSITIONS, HIDDEN], 0.5), positions], "embed.pos", axis=0)
    return g.node("Add", [tokens, pos], "embed.out")


def causal_mask(g, seq_1d):
    """[seq, seq] float: 0 on and below the diagonal, float32 min above (what HF exports add)."""
    square = g.node("Concat", [seq_1d, seq_1d], "mask.shape", axis=0)
    minimum = numpy_helper.from_array(np.array([np.finfo(np.float32).min], np.float32), "mask.fill")
    full = g.node("ConstantOfShape", [square], "mask.full", value=minimum)
    return g.node("Trilu", [full, g.constant("mask.k", np.int64(1))], "mask", upper=1)


def build(seed, f16_weights):
    g = GraphBuilder(np.random.RandomState(seed), f16_weights)
    ids = "input_ids"
    shape = g.node("Shape", [ids], "ids.shape")
    batch_seq = g.node("Slice", [shape, g.constant("ids.begin", np.array([0], np.int64)),
                                 g.constant("ids.end", np.array([2], np.int64))], "ids.batch_seq")
    seq_1d = g.node("Gather", [shape, g.constant("ids.seq_index", np.array([1], np.int64))], "ids.seq", axis=0)

    x = embeddings(g, ids, seq_1d)
    mask = causal_mask(g, seq_1d)
    for layer in range(LAYERS):
        name = f"layers.{layer}"
        attn = attention(g, name + ".attn", g.layer_norm(name + ".ln1", x), batch_seq, mask)
        x = g.node("Add", [x, attn], name + ".resid1")
        activation = "silu" if layer % 2 == 0 else "gelu"
        x = g.node("Add", [x, mlp(g, name + ".mlp", g.layer_norm(name + ".ln2", x), activation)], name + ".resid2")
    final = g.layer_norm("ln_f", x)
    g.node("MatMul", [final, g.weight("lm_head", [HIDDEN, VOCAB], 1 / np.sqrt(HIDDEN))], "logits")

    graph = helper.make_graph(
        g.nodes, "demo_decoder",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])],
        g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnx-genai demo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for file_name, f16_weights in (("demo_decoder.onnx", False), ("demo_decoder_f16w.onnx", True)):
        path = os.path.join(args.out_dir, file_name)
        onnx.save(build(args.seed, f16_weights), path)
        print(path)


if __name__ == "__main__":
    main()
