"""The graph onnxruntime-genai's model builder (src/python/py/models/builder.py) writes for CPU.

    input_ids [B, S] int64, attention_mask [B, T] int64, past_key_values.{i}.key/value [B, kv, P, hd]
    (+ position_ids [B, S] int64 with --position-ids)
      attention_mask -> ReduceSum - 1 -> Cast int32      = seqlens_k [B] ([B, 1] with --seqlens-keepdims)
                     -> Shape -> Gather(1) -> Cast int32 = total_sequence_length (scalar)
      Gather(embed_tokens) (* sqrt(hidden) for Gemma); tied: Transpose(lm_head weight) -> Gather;
        quantized: GatherBlockQuantized on the LM head's codes
      per layer:
        SimplifiedLayerNormalization (layer 0) / SkipSimplifiedLayerNormalization (residual add + norm)
        packed q|k|v MatMul(NBits) (+ packed bias Add)
          Qwen3: Split -> Reshape [B, S*heads, hd] -> SimplifiedLayerNormalization -> Reshape
          --position-ids: separate q/k/v MatMuls, com.microsoft.RotaryEmbedding on q and k
          --separate-qkv: separate q/k/v MatMuls straight into GroupQueryAttention
        GroupQueryAttention (do_rotary=1 with cos/sin caches [max_pos, hd/2] unless --position-ids;
          local_window_size = the layer's sliding window; softcap; head_sink = gpt-oss's sinks,
          input 11)  -> present.{i}.key/value [B, kv, T, hd]
        o_proj MatMul(NBits) (+ Add bias, gpt-oss); SkipSimplifiedLayerNormalization
        gate, up MatMul(NBits); SiLU as Sigmoid*x, or Gelu(approximate=tanh); Mul; down MatMul(NBits)
          or, in mixture-of-experts layers, router MatMul -> MoE / QMoE (moe_graph.py)
      SkipSimplifiedLayerNormalization -> lm_head MatMul(NBits) (-> Div/Tanh/Mul softcap) -> logits

Node and initializer names follow the builder's ("/model/layers.0/attn/qkv_proj/MatMul",
"model.layers.0.attn.qkv_proj.MatMul.weight"). MatMulNBits weights are quantized here with
quantize.py (the builder runs ORT's quantizer afterwards; the layout is the op's, not the tool's).
"""
import numpy as np
from onnx import TensorProto

from . import quantize, rope
from .moe_graph import MoeEmitter
from .onnx_graph import Graph
from .weights import lm_head, norm_scale

OPSETS = {"": 21, "com.microsoft": 1}
IR_VERSION = 10


def _weight_name(node_name):
    return node_name[1:].replace("/", ".")


class GenaiGraphBuilder:
    def __init__(self, cfg, weights, opts):
        self.cfg, self.weights, self.opts = cfg, weights, opts
        self.g = Graph("main_graph", opts.float_dtype)
        self.quantized = quantize.quantized_tensors(cfg, weights, opts)
        self.quantized_experts = quantize.quantized_experts(cfg, weights, opts)
        self.rotary_in_attention = not opts.position_ids
        self.moe = MoeEmitter(self)

    # --- building blocks -------------------------------------------------------------------

    def linear(self, basename, x, names, output=None):
        """x @ W^T for W = the canonical weights `names` stacked by rows (a packed projection)."""
        outputs = [output] if output else 1
        if self.opts.bits is not None:
            return self._matmul_nbits(basename, x, [self.quantized[n] for n in names], outputs)
        w = np.concatenate([self._float_weight(n) for n in names], axis=0)
        weight = self.g.weight(_weight_name(basename) + ".weight", w.T)
        return self.g.node("MatMul", [x, weight], basename, outputs=outputs)

    def _float_weight(self, name):
        return lm_head(self.cfg, self.weights) if name == "lm_head.weight" else self.weights[name]

    def _matmul_nbits(self, basename, x, parts, outputs):
        bits, block = self.opts.bits, self.opts.block_size
        prefix = _weight_name(basename) + f".weight_Q{bits}G{block}"
        inputs = [x, self.g.initializer(prefix, np.concatenate([p.codes for p in parts])),
                  self.g.initializer(prefix + "_scales", np.concatenate([p.scales for p in parts]))]
        if parts[0].zero_points is not None:
            inputs.append(self.g.initializer(prefix + "_zero_points",
                                             np.concatenate([p.zero_points for p in parts])))
        return self.g.node("MatMulNBits", inputs, f"{basename}_Q{bits}", outputs=outputs, domain="com.microsoft",
                           K=parts[0].k, N=sum(p.n for p in parts), bits=bits, block_size=block,
                           accuracy_level=self.opts.accuracy_level)

    def bias(self, basename, x, names):
        b = np.concatenate([self.weights[n] for n in names])
        return self.g.node("Add", [x, self.g.weight(_weight_name(basename) + ".bias", b)], basename)

    def _norm_weight(self, stored, initializer=None):
        """The norm's scale as an initializer named `initializer` (default: the stored weight's name)."""
        return self.g.weight(initializer or stored, norm_scale(self.cfg, self.weights[stored]))

    def simplified_norm(self, name, x, stored, initializer=None):
        return self.g.node("SimplifiedLayerNormalization", [x, self._norm_weight(stored, initializer)], name,
                           epsilon=self.cfg.rms_norm_eps, axis=-1, stash_type=1)

    def skip_norm(self, name, residual, x, stored, keep_sum=True):
        """(normalized, residual + x): SkipSimplifiedLayerNormalization's outputs 0 and 3."""
        outputs = [f"{name}/output_0", "", "", f"{name}/output_3"] if keep_sum else [f"{name}/output_0"]
        self.g.node("SkipSimplifiedLayerNormalization", [residual, x, self._norm_weight(stored)], name,
                    outputs=outputs, domain="com.microsoft", epsilon=self.cfg.rms_norm_eps)
        return outputs[0], outputs[-1] if keep_sum else None

    # --- model parts -----------------------------------------------------------------------

    def mask_lengths(self):
        g = self.g
        base = "/model/attn_mask_reformat/attn_mask_subgraph"
        total = g.node("ReduceSum", ["attention_mask", g.i64([1])], f"{base}/ReduceSum",
                       keepdims=int(self.opts.seqlens_keepdims))
        seqlens = g.node("Sub", [total, g.i64([1])], f"{base}/Sub")
        self.seqlens_k = g.node("Cast", [seqlens], f"{base}/Sub/Cast", to=TensorProto.INT32)
        shape = g.node("Shape", ["attention_mask"], f"{base}/Shape")
        width = g.node("Gather", [shape, g.i64(1)], f"{base}/Gather", axis=0)
        self.total_length = g.node("Cast", [width], f"{base}/Gather/Cast", to=TensorProto.INT32)

    def rotary_caches(self):
        cos, sin = rope.half_tables(self.cfg)
        self.cos_cache = self.g.weight("cos_cache", cos)
        self.sin_cache = self.g.weight("sin_cache", sin)

    def embedding(self):
        g, cfg = self.g, self.cfg
        base = "/model/embed_tokens"
        if self.opts.quantize_embeddings:
            out = self._quantized_embedding(base)
        elif cfg.tie_word_embeddings and self.opts.bits is None:
            table = g.node("Transpose", ["lm_head.MatMul.weight"], f"{base}/Transpose", perm=[1, 0])
            out = g.node("Gather", [table, "input_ids"], f"{base}/Gather")
        else:
            table = g.weight("model.embed_tokens.weight", self.weights["model.embed_tokens.weight"])
            out = g.node("Gather", [table, "input_ids"], f"{base}/Gather")
        if cfg.scale_embeddings:
            out = g.node("Mul", [out, g.scalar(cfg.embedding_multiplier)], f"{base}/Mul")
        return out

    def _quantized_embedding(self, base):
        g, cfg, q = self.g, self.cfg, self.quantized["model.embed_tokens.weight"]
        bits, block = self.opts.bits, self.opts.block_size
        if cfg.tie_word_embeddings:  # the LM head's own initializers, seen as a table
            prefix = f"lm_head.MatMul.weight_Q{bits}G{block}"
        else:
            prefix = f"model.embed_tokens.weight_Q{bits}G{block}"
            g.initializer(prefix, q.codes)
            g.initializer(prefix + "_scales", q.scales)
            if q.zero_points is not None:
                g.initializer(prefix + "_zero_points", q.zero_points)
        row_bytes = cfg.hidden_size * bits // 8
        table = g.node("Reshape", [prefix, g.i64([cfg.vocab_size, row_bytes])], f"{base}/Reshape")
        inputs = [table, "input_ids", prefix + "_scales"]
        if q.zero_points is not None:
            inputs.append(prefix + "_zero_points")
        return g.node("GatherBlockQuantized", inputs, f"{base}/GatherBlockQuantized", domain="com.microsoft",
                      bits=bits, block_size=block, gather_axis=0, quantize_axis=1)

    def attention(self, i, x):
        cfg, g = self.cfg, self.g
        base = f"/model/layers.{i}/attn"
        attn = f"model.layers.{i}.self_attn"
        proj = [f"{attn}.{p}_proj.weight" for p in "qkv"]
        biases = [f"{attn}.{p}_proj.bias" for p in "qkv"]
        if self.opts.position_ids or self.opts.separate_qkv:
            q, k, v = (self.linear(f"{base}/{p}_proj/MatMul", x, [w]) for p, w in zip("qkv", proj))
            if cfg.attention_bias:
                q, k, v = (self.bias(f"{base}/{p}_proj/Add", t, [b]) for p, t, b in zip("qkv", (q, k, v), biases))
        else:
            packed = self.linear(f"{base}/qkv_proj/MatMul", x, proj)
            if cfg.attention_bias:
                packed = self.bias(f"{base}/qkv_proj/Add", packed, biases)
            q, k, v = packed, "", ""
            if cfg.qk_norm:
                q, k, v = g.node("Split", [packed, g.i64([cfg.q_size, cfg.kv_size, cfg.kv_size])],
                                 f"{base}/qkv_proj/Split", outputs=3, axis=-1)
        if cfg.qk_norm:
            q = self._head_norm(f"{base}/q_norm", q, f"{attn}.q_norm.weight", cfg.q_size)
            k = self._head_norm(f"{base}/k_norm", k, f"{attn}.k_norm.weight", cfg.kv_size)
        if self.opts.position_ids:
            q = self._rotary(f"{base}/q_rotary/RotaryEmbedding", q)
            k = self._rotary(f"{base}/k_rotary/RotaryEmbedding", k)
        out = self.linear(f"{base}/o_proj/MatMul", self._group_query_attention(i, base, q, k, v),
                          [f"{attn}.o_proj.weight"])
        return self.bias(f"{base}/o_proj/Add", out, [f"{attn}.o_proj.bias"]) if cfg.o_proj_bias else out

    def _head_norm(self, base, x, weight, width):
        """RMSNorm of each head: [B, S, width] -> [B, S * heads, head_dim] -> norm -> back."""
        g = self.g
        per_head = g.node("Reshape", [x, g.i64([0, -1, self.cfg.head_dim])], f"{base}/Reshape_1")
        normed = self.simplified_norm(f"{base}/SimplifiedLayerNormalization", per_head, weight,
                                      _weight_name(base) + ".layernorm.weight")
        return g.node("Reshape", [normed, g.i64([0, -1, width])], f"{base}/Reshape_2")

    def _rotary(self, name, x):
        return self.g.node("RotaryEmbedding", [x, "position_ids", self.cos_cache, self.sin_cache], name,
                           domain="com.microsoft", interleaved=0, num_heads=0, rotary_embedding_dim=0)

    def _group_query_attention(self, i, base, q, k, v):
        cfg = self.cfg
        inputs = [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", self.seqlens_k, self.total_length]
        inputs += [self.cos_cache, self.sin_cache] if self.rotary_in_attention else ["", ""]
        if cfg.attention_sinks:  # after position_ids and attention_bias, both unused
            sinks = self.weights[f"model.layers.{i}.self_attn.sinks"]
            inputs += ["", "", self.g.weight(f"model.layers.{i}.attn.sinks", sinks)]
        while inputs[-1] == "":
            inputs.pop()
        window = cfg.layer_window(i)
        name = f"{base}/GroupQueryAttention"
        return self.g.node(
            "GroupQueryAttention", inputs, name, outputs=[f"{name}/output_0", f"present.{i}.key", f"present.{i}.value"],
            domain="com.microsoft", num_heads=cfg.num_attention_heads, kv_num_heads=cfg.num_key_value_heads,
            scale=float(1.0 / np.sqrt(cfg.head_dim)),
            local_window_size=window if window else -1,
            softcap=float(cfg.attn_logit_softcapping or 0.0), do_rotary=int(self.rotary_in_attention),
            rotary_interleaved=0)[0]

    def mlp(self, i, x):
        g = self.g
        base = f"/model/layers.{i}/mlp"
        mlp = f"model.layers.{i}.mlp"
        gate = self.linear(f"{base}/gate_proj/MatMul", x, [f"{mlp}.gate_proj.weight"])
        up = self.linear(f"{base}/up_proj/MatMul", x, [f"{mlp}.up_proj.weight"])
        if self.cfg.hidden_act == "silu":
            sigmoid = g.node("Sigmoid", [gate], f"{base}/act_fn/Sigmoid")
            act = g.node("Mul", [gate, sigmoid], f"{base}/act_fn/Mul")
        else:
            act = g.node("Gelu", [gate], f"{base}/act_fn/FastGelu", approximate="tanh")
        product = g.node("Mul", [act, up], f"{base}/Mul")
        return self.linear(f"{base}/down_proj/MatMul", product, [f"{mlp}.down_proj.weight"])

    def lm_head(self, x):
        cap = self.cfg.final_logit_softcapping
        if not cap:
            return self.linear("/lm_head/MatMul", x, ["lm_head.weight"], output="logits")
        logits = self.linear("/lm_head/MatMul", x, ["lm_head.weight"])
        return self.g.softcap("/lm_head/softcap", logits, cap, outputs=["logits"])

    def build(self):
        """Layer i's input norm is the Skip norm that closes layer i - 1 (its residual add included);
        the last one, without the sum output, is the final norm."""
        layers = self.cfg.num_hidden_layers
        self.g.add_decoder_io(self.cfg, self.opts.position_ids)
        self.mask_lengths()
        self.rotary_caches()
        residual = self.embedding()
        normed = self.simplified_norm("/model/layers.0/input_layernorm/LayerNorm", residual,
                                      "model.layers.0.input_layernorm.weight")
        for i in range(layers):
            normed, residual = self.skip_norm(f"/model/layers.{i}/post_attention_layernorm/SkipLayerNorm", residual,
                                              self.attention(i, normed),
                                              f"model.layers.{i}.post_attention_layernorm.weight")
            mlp_out = self.moe.layer(i, normed) if self.cfg.is_moe_layer(i) else self.mlp(i, normed)
            if i + 1 < layers:
                normed, residual = self.skip_norm(f"/model/layers.{i + 1}/input_layernorm/SkipLayerNorm", residual,
                                                  mlp_out, f"model.layers.{i + 1}.input_layernorm.weight")
            else:
                normed, _ = self.skip_norm(f"/model/layers.{layers}/final_norm_layernorm/SkipLayerNorm", residual,
                                           mlp_out, "model.norm.weight", keep_sum=False)
        self.lm_head(normed)
        return self.g.to_model(OPSETS, IR_VERSION)


def build(cfg, weights, opts):
    return GenaiGraphBuilder(cfg, weights, opts).build()
