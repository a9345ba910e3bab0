"""Graphs of standard ONNX ops, shaped like torch.onnx / Optimum exports of Hugging Face models.

    input_ids [B, S] int64, attention_mask [B, T] int64, position_ids [B, S] int64,
    past_key_values.{i}.key/value [B, kv, P, hd]  ->  logits [B, S, V], present.{i}.key/value [B, kv, T, hd]

opset 17 ("standard"):
    mask: allowed[b, 0, s, t] = t <= P + s  (and t > P + s - window)  and attention_mask[b, t]
          -> Where(allowed, 0, lowest float) added to the scores (a fully masked row of a pad
             token then averages instead of producing NaN, as in Hugging Face)
    RMSNorm: x * 1/Sqrt(ReduceMean(Pow(x, 2)) + eps) * w, computed in float32
    rotary: cos/sin [max_pos, hd] gathered by position_ids; x * cos + Concat(-x2, x1) * sin
            with x1, x2 the Slices of the two halves
    attention: Concat(past, new) along the sequence -> present; kv heads repeated by
               Unsqueeze/Expand/Reshape; MatMul, scale, (softcap), + mask, Softmax in float32, MatMul
    Phi-3: one q|k|v MatMul and one gate|up MatMul, each followed by Split
opset 23 ("opset23"): the same graph with RMSNormalization, RotaryEmbedding (half tables
    [max_pos, hd/2] and position_ids) and Attention (past/present, the same additive mask,
    softcap; kv heads grouped by the op), and Gelu(approximate=tanh) for Gemma.
"""
import numpy as np
from onnx import TensorProto

from . import rope
from .onnx_graph import Graph
from .weights import lm_head, norm_scale


class StandardGraphBuilder:
    def __init__(self, cfg, weights, opts):
        self.cfg, self.weights = cfg, weights
        self.opset23 = opts.style == "opset23"
        self.g = Graph("decoder", opts.float_dtype)
        self.f16 = self.g.float_dtype == np.float16

    # --- small helpers ---------------------------------------------------------------------

    def shape_dim(self, name, value, axis):
        shape = self.g.node("Shape", [value], f"{name}/Shape")
        return self.g.node("Gather", [shape, self.g.i64(axis)], f"{name}/Gather", axis=0)

    def to_f32(self, name, x):
        return self.g.node("Cast", [x], name, to=TensorProto.FLOAT) if self.f16 else x

    def from_f32(self, name, x):
        return self.g.node("Cast", [x], name, to=TensorProto.FLOAT16) if self.f16 else x

    def linear(self, name, x, weight_name, weight=None):
        w = self.weights[weight_name] if weight is None else weight
        out = self.g.node("MatMul", [x, self.g.weight(weight_name + ".T", w.T)], f"{name}/MatMul")
        bias_name = weight_name[:-len("weight")] + "bias"
        if bias_name in self.weights:
            out = self.g.node("Add", [out, self.g.weight(bias_name, self.weights[bias_name])], f"{name}/Add")
        return out

    def rms_norm(self, name, x, stored_name):
        g = self.g
        scale = g.weight(stored_name, norm_scale(self.cfg, self.weights[stored_name]))
        if self.opset23:
            return g.node("RMSNormalization", [x, scale], name, axis=-1, epsilon=self.cfg.rms_norm_eps, stash_type=1)
        x32 = self.to_f32(f"{name}/Cast", x)
        square = g.node("Pow", [x32, g.constant(2.0, np.float32)], f"{name}/Pow")
        mean = g.node("ReduceMean", [square], f"{name}/ReduceMean", axes=[-1], keepdims=1)
        shifted = g.node("Add", [mean, g.constant(self.cfg.rms_norm_eps, np.float32)], f"{name}/Add")
        rms = g.node("Sqrt", [shifted], f"{name}/Sqrt")
        inverse = g.node("Div", [g.constant(1.0, np.float32), rms], f"{name}/Div")
        normed = self.from_f32(f"{name}/Cast_1", g.node("Mul", [x32, inverse], f"{name}/Mul"))
        return g.node("Mul", [scale, normed], f"{name}/Mul_1")

    # --- model parts -----------------------------------------------------------------------

    def attention_bias(self):
        """[B, 1, S, T] additive mask: 0 where a query may look, the lowest float elsewhere."""
        g, name = self.g, "/model/mask"
        past = self.shape_dim(f"{name}/past", "past_key_values.0.key", 2)
        seq = self.shape_dim(f"{name}/seq", "input_ids", 1)
        total = self.shape_dim(f"{name}/total", "attention_mask", 1)
        end = g.node("Add", [past, seq], f"{name}/Add")
        query = g.node("Unsqueeze", [g.node("Range", [past, end, g.i64(1)], f"{name}/Range"), g.i64([1])],
                       f"{name}/Unsqueeze")  # [S, 1] absolute query index
        key = g.node("Unsqueeze", [g.node("Range", [g.i64(0), total, g.i64(1)], f"{name}/Range_1"), g.i64([0])],
                     f"{name}/Unsqueeze_1")  # [1, T]
        allowed = g.node("LessOrEqual", [key, query], f"{name}/LessOrEqual")
        if self.cfg.sliding_window:
            oldest = g.node("Sub", [query, g.i64(self.cfg.sliding_window)], f"{name}/Sub")
            in_window = g.node("Greater", [key, oldest], f"{name}/Greater")
            allowed = g.node("And", [allowed, in_window], f"{name}/And")
        causal = g.node("Unsqueeze", [allowed, g.i64([0, 1])], f"{name}/Unsqueeze_2")
        padding = g.node("Unsqueeze", [g.node("Cast", ["attention_mask"], f"{name}/Cast", to=TensorProto.BOOL),
                                       g.i64([1, 2])], f"{name}/Unsqueeze_3")
        both = g.node("And", [causal, padding], f"{name}/And_1")
        lowest = float(np.finfo(g.float_dtype).min)
        return g.node("Where", [both, g.scalar(0.0), g.scalar(lowest)], f"{name}/Where")

    def rotary_tables(self):
        g = self.g
        if self.opset23:
            cos, sin = rope.half_tables(self.cfg)
            return g.weight("cos_cache", cos), g.weight("sin_cache", sin)
        cos, sin = rope.full_tables(self.cfg)
        gathered = [g.node("Gather", [g.weight(f"{n}_cached", t), "position_ids"], f"/model/rotary/{n}/Gather")
                    for n, t in (("cos", cos), ("sin", sin))]
        return tuple(g.node("Unsqueeze", [t, g.i64([1])], f"/model/rotary/{n}/Unsqueeze")
                     for t, n in zip(gathered, ("cos", "sin")))  # [B, 1, S, hd]

    def rotate(self, name, x):
        """RoPE on x [B, heads, S, hd]."""
        g, half = self.g, self.cfg.head_dim // 2
        cos, sin = self.rotary
        if self.opset23:
            return g.node("RotaryEmbedding", [x, cos, sin, "position_ids"], name, interleaved=0)
        first = g.node("Slice", [x, g.i64([0]), g.i64([half]), g.i64([-1])], f"{name}/Slice")
        second = g.node("Slice", [x, g.i64([half]), g.i64([2 * half]), g.i64([-1])], f"{name}/Slice_1")
        rotated = g.node("Concat", [g.node("Neg", [second], f"{name}/Neg"), first], f"{name}/Concat", axis=-1)
        return g.node("Add", [g.node("Mul", [x, cos], f"{name}/Mul"), g.node("Mul", [rotated, sin], f"{name}/Mul_1")],
                      f"{name}/Add")

    def heads(self, name, x, count, norm=None):
        """[B, S, count*hd] -> [B, count, S, hd], with an RMSNorm per head before the transpose."""
        g = self.g
        split = g.node("Reshape", [x, g.i64([0, 0, count, self.cfg.head_dim])], f"{name}/Reshape")
        if norm:
            split = self.rms_norm(f"{name}/norm", split, norm)
        return g.node("Transpose", [split], f"{name}/Transpose", perm=[0, 2, 1, 3])

    def project_qkv(self, base, attn, x):
        cfg = self.cfg
        if not cfg.fused_weights:
            return [self.linear(f"{base}/{p}_proj", x, f"{attn}.{p}_proj.weight") for p in "qkv"]
        fused = np.concatenate([self.weights[f"{attn}.{p}_proj.weight"] for p in "qkv"])
        packed = self.linear(f"{base}/qkv_proj", x, f"{attn}.qkv_proj.weight", fused)
        if cfg.attention_bias:
            bias = np.concatenate([self.weights[f"{attn}.{p}_proj.bias"] for p in "qkv"])
            packed = self.g.node("Add", [packed, self.g.weight(f"{attn}.qkv_proj.bias", bias)], f"{base}/qkv_proj/Add")
        return self.g.node("Split", [packed, self.g.i64([cfg.q_size, cfg.kv_size, cfg.kv_size])],
                           f"{base}/qkv_proj/Split", outputs=3, axis=-1)

    def attention(self, i, x):
        cfg, g = self.cfg, self.g
        base, attn = f"/model/layers.{i}/self_attn", f"model.layers.{i}.self_attn"
        q, k, v = self.project_qkv(base, attn, x)
        q = self.heads(f"{base}/q", q, cfg.num_attention_heads, cfg.qk_norm and f"{attn}.q_norm.weight")
        k = self.heads(f"{base}/k", k, cfg.num_key_value_heads, cfg.qk_norm and f"{attn}.k_norm.weight")
        v = self.heads(f"{base}/v", v, cfg.num_key_value_heads)
        q = self.rotate(f"{base}/q_rotary", q)
        k = self.rotate(f"{base}/k_rotary", k)
        past = [f"past_key_values.{i}.{n}" for n in ("key", "value")]
        present = [f"present.{i}.{n}" for n in ("key", "value")]
        if self.opset23:
            extra = {"softcap": float(cfg.attn_logit_softcapping)} if cfg.attn_logit_softcapping else {}
            context = g.node("Attention", [q, k, v, self.mask, past[0], past[1]], f"{base}/Attention",
                             outputs=[f"{base}/Attention/output_0", present[0], present[1]],
                             scale=float(1.0 / np.sqrt(cfg.head_dim)), is_causal=0, softmax_precision=TensorProto.FLOAT,
                             **extra)[0]
        else:
            keys = g.node("Concat", [past[0], k], f"{base}/key/Concat", outputs=[present[0]], axis=2)
            values = g.node("Concat", [past[1], v], f"{base}/value/Concat", outputs=[present[1]], axis=2)
            context = self.scaled_dot_product(base, q, self.repeat_kv(f"{base}/key", keys),
                                              self.repeat_kv(f"{base}/value", values))
        merged = g.node("Reshape", [g.node("Transpose", [context], f"{base}/Transpose", perm=[0, 2, 1, 3]),
                                    g.i64([0, 0, cfg.q_size])], f"{base}/Reshape")
        return self.linear(f"{base}/o_proj", merged, f"{attn}.o_proj.weight")

    def repeat_kv(self, name, x):
        """[B, kv, T, hd] -> [B, heads, T, hd], each kv head serving group_size query heads."""
        cfg, g = self.cfg, self.g
        if cfg.group_size == 1:
            return x
        grouped = g.node("Unsqueeze", [x, g.i64([2])], f"{name}/Unsqueeze")
        expanded = g.node("Expand", [grouped, g.i64([1, 1, cfg.group_size, 1, 1])], f"{name}/Expand")
        return g.node("Reshape", [expanded, g.i64([0, cfg.num_attention_heads, -1, cfg.head_dim])], f"{name}/Reshape")

    def scaled_dot_product(self, base, q, k, v):
        cfg, g = self.cfg, self.g
        keys_t = g.node("Transpose", [k], f"{base}/key/Transpose", perm=[0, 1, 3, 2])
        scores = g.node("Mul", [g.node("MatMul", [q, keys_t], f"{base}/MatMul"), g.scalar(1.0 / np.sqrt(cfg.head_dim))],
                        f"{base}/Mul")
        if cfg.attn_logit_softcapping:
            scores = g.softcap(f"{base}/softcap", scores, cfg.attn_logit_softcapping)
        masked = g.node("Add", [scores, self.mask], f"{base}/Add")
        probs = self.from_f32(f"{base}/Cast_1", g.node("Softmax", [self.to_f32(f"{base}/Cast", masked)],
                                                        f"{base}/Softmax", axis=-1))
        return g.node("MatMul", [probs, v], f"{base}/MatMul_1")

    def activation(self, name, x):
        g = self.g
        if self.cfg.hidden_act == "silu":
            return g.node("Mul", [x, g.node("Sigmoid", [x], f"{name}/Sigmoid")], f"{name}/Mul")
        if self.opset23:
            return g.node("Gelu", [x], f"{name}/Gelu", approximate="tanh")
        cube = g.node("Mul", [g.node("Mul", [x, x], f"{name}/Mul"), x], f"{name}/Mul_1")
        inner = g.node("Add", [x, g.node("Mul", [cube, g.scalar(0.044715)], f"{name}/Mul_2")], f"{name}/Add")
        scaled = g.node("Mul", [inner, g.scalar(np.sqrt(2.0 / np.pi))], f"{name}/Mul_3")
        gate = g.node("Add", [g.node("Tanh", [scaled], f"{name}/Tanh"), g.scalar(1.0)], f"{name}/Add_1")
        return g.node("Mul", [g.node("Mul", [x, g.scalar(0.5)], f"{name}/Mul_4"), gate], f"{name}/Mul_5")

    def mlp(self, i, x):
        cfg, g = self.cfg, self.g
        base, mlp = f"/model/layers.{i}/mlp", f"model.layers.{i}.mlp"
        if cfg.fused_weights:
            fused = np.concatenate([self.weights[f"{mlp}.gate_proj.weight"], self.weights[f"{mlp}.up_proj.weight"]])
            packed = self.linear(f"{base}/gate_up_proj", x, f"{mlp}.gate_up_proj.weight", fused)
            gate, up = g.node("Split", [packed, g.i64([cfg.intermediate_size] * 2)], f"{base}/gate_up_proj/Split",
                              outputs=2, axis=-1)
        else:
            gate = self.linear(f"{base}/gate_proj", x, f"{mlp}.gate_proj.weight")
            up = self.linear(f"{base}/up_proj", x, f"{mlp}.up_proj.weight")
        product = g.node("Mul", [self.activation(f"{base}/act_fn", gate), up], f"{base}/Mul")
        return self.linear(f"{base}/down_proj", product, f"{mlp}.down_proj.weight")

    def embedding(self):
        g, cfg = self.g, self.cfg
        table = g.weight("model.embed_tokens.weight", self.weights["model.embed_tokens.weight"])
        x = g.node("Gather", [table, "input_ids"], "/model/embed_tokens/Gather")
        if cfg.scale_embeddings:
            x = g.node("Mul", [x, g.scalar(cfg.embedding_multiplier)], "/model/embed_tokens/Mul")
        return x

    def lm_head(self, x):
        g, cfg = self.g, self.cfg
        cap = cfg.final_logit_softcapping
        outputs = 1 if cap else ["logits"]
        if cfg.tie_word_embeddings:
            table_t = g.node("Transpose", ["model.embed_tokens.weight"], "/lm_head/Transpose", perm=[1, 0])
        else:
            table_t = g.weight("lm_head.weight.T", lm_head(cfg, self.weights).T)
        logits = g.node("MatMul", [x, table_t], "/lm_head/MatMul", outputs=outputs)
        return g.softcap("/lm_head/softcap", logits, cap, outputs=["logits"]) if cap else logits

    def build(self):
        cfg, g = self.cfg, self.g
        g.add_decoder_io(cfg, position_ids=True)
        self.mask = self.attention_bias()
        self.rotary = self.rotary_tables()
        x = self.embedding()
        for i in range(cfg.num_hidden_layers):
            layer = f"model.layers.{i}"
            h = self.rms_norm(f"/model/layers.{i}/input_layernorm", x, f"{layer}.input_layernorm.weight")
            x = g.node("Add", [x, self.attention(i, h)], f"/model/layers.{i}/Add")
            h = self.rms_norm(f"/model/layers.{i}/post_attention_layernorm", x,
                              f"{layer}.post_attention_layernorm.weight")
            x = g.node("Add", [x, self.mlp(i, h)], f"/model/layers.{i}/Add_1")
        self.lm_head(self.rms_norm("/model/norm", x, "model.norm.weight"))
        if self.opset23:
            return g.to_model({"": 23}, ir_version=11)
        return g.to_model({"": 17}, ir_version=8)


def build(cfg, weights, opts):
    return StandardGraphBuilder(cfg, weights, opts).build()
