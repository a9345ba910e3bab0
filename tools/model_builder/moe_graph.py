"""A mixture-of-experts MLP in the genai style: com.microsoft MoE (float experts) or QMoE.

    x [B, S, hidden] -> router MatMul (+ Add bias) -> Reshape [B * S, E] = router_probs (logits)
    MoE / QMoE(x, router_probs, fc1 = gate|up, fc2 = down) -> [B, S, hidden]

fc1 holds each expert's gate and up rows interleaved (row 2j gate j, row 2j + 1 up j:
swiglu_fusion 1, the one fused layout ONNX Runtime's CPU kernels run, and how gpt-oss stores
its gate_up_proj). The activation is SwiGLU with activation_alpha / activation_beta /
swiglu_limit when the config changes them (gpt-oss). The router stays a float MatMul: its
logits pick the experts, and quantizing it would move near ties.

Routing: the k largest logits and a softmax over them equals the softmax over all experts
restricted to the top k and renormalised, so Mixtral, Qwen3-MoE with norm_topk_prob and gpt-oss
all route through normalize_routing_weights 1 (MoE takes the softmax first, QMoE the top k
first). Qwen3-MoE without norm_topk_prob keeps the softmax over all experts: MoE with
normalize_routing_weights 0, QMoE with those probabilities as router_weights (input 14).

QMoE experts: "int" codes [E, N, K * bits / 8] with block scales [E, N, K / block] (and zero
points when asymmetric), or "fp4" (MXFP4) codes [E, N, K / 2] with float8e8m0 scales
[E, N, K / 32] and global scales of 1.
"""
import numpy as np
from onnx import TensorProto

from .quantize import Mxfp4Weight

FLOAT8E8M0 = 24  # ONNX element type; onnx 1.12's Python enum lacks it


def _interleave(gate, up):
    """Rows of gate and up (same shape, rows first) alternated: gate 0, up 0, gate 1, ..."""
    out = np.empty((gate.shape[0] * 2,) + gate.shape[1:], dtype=gate.dtype)
    out[0::2], out[1::2] = gate, up
    return out


class MoeEmitter:
    def __init__(self, builder):
        self.b, self.g, self.cfg, self.opts = builder, builder.g, builder.cfg, builder.opts
        self.quantized = builder.quantized_experts

    def layer(self, i, x):
        cfg, g = self.cfg, self.g
        base = f"/model/layers.{i}/moe"
        mlp = f"model.layers.{i}.mlp"
        router = g.weight(f"model.layers.{i}.moe.router.MatMul.weight", self.b.weights[f"{mlp}.gate.weight"].T)
        logits = g.node("MatMul", [x, router], f"{base}/router/MatMul")
        if cfg.moe_bias:
            logits = self.b.bias(f"{base}/router/Add", logits, [f"{mlp}.gate.bias"])
        logits = g.node("Reshape", [logits, g.i64([-1, cfg.num_experts])], f"{base}/router/Reshape")
        renormalised = cfg.moe_routing == "topk_softmax" or cfg.norm_topk_prob
        attrs = dict(k=cfg.num_experts_per_tok, activation_type="swiglu", swiglu_fusion=1,
                     normalize_routing_weights=int(renormalised))
        if cfg.swiglu_alpha != 1.0 or cfg.swiglu_beta != 0.0:
            attrs.update(activation_alpha=float(cfg.swiglu_alpha), activation_beta=float(cfg.swiglu_beta))
        if cfg.swiglu_limit is not None:
            attrs["swiglu_limit"] = float(cfg.swiglu_limit)
        fc1 = [[f"{mlp}.experts.{e}.{p}_proj" for p in ("gate", "up")] for e in range(cfg.num_experts)]
        fc2 = [[f"{mlp}.experts.{e}.down_proj"] for e in range(cfg.num_experts)]
        prefix = f"model.layers.{i}.moe.experts"
        if self.opts.expert_format == "float":
            inputs = [x, logits, *self._float(f"{prefix}.gate_up_proj", fc1), *self._float(f"{prefix}.down_proj", fc2)]
            return g.node("MoE", inputs, f"{base}/MoE", domain="com.microsoft", **attrs)
        router_weights = ""
        if not renormalised:
            router_weights = g.node("Softmax", [logits], f"{base}/router/Softmax", axis=-1)
        return self._qmoe(base, prefix, x, logits, router_weights, fc1, fc2, attrs)

    def _float(self, name, experts):
        """(weights [E, N, K], bias [E, N] or "") of one projection, gate and up interleaved."""
        weights = np.stack([self._rows([self.b.weights[p + ".weight"] for p in parts]) for parts in experts])
        return self.g.weight(name + ".weight", weights), self._bias(name, experts)

    def _bias(self, name, experts):
        """[E, N] float bias of one projection (gate and up interleaved), or "" without biases."""
        if not self.cfg.moe_bias:
            return ""
        return self.g.weight(name + ".bias", np.stack([self._rows([self.b.weights[p + ".bias"] for p in parts])
                                                      for parts in experts]))

    @staticmethod
    def _rows(parts):
        return parts[0] if len(parts) == 1 else _interleave(*parts)

    def _quantized(self, name, experts):
        """QMoE inputs of one projection: (codes, scales, bias, zero points, global scale)."""
        g = self.g
        parts = [[self.quantized[p + ".weight"] for p in names] for names in experts]
        mxfp4 = isinstance(parts[0][0], Mxfp4Weight)
        codes = np.stack([self._rows([q.codes.reshape(q.codes.shape[0], -1) for q in p]) for p in parts])
        scales = np.stack([self._rows([q.scales for q in p]) for p in parts])
        codes_name, bias = g.initializer(name + ".qweight", codes), self._bias(name, experts)
        if mxfp4:
            scales_name = g.initializer(name + ".scales", scales, elem_type=FLOAT8E8M0)
            global_scale = g.initializer(name + ".global_scale", np.ones(len(experts), dtype=np.float32))
            return codes_name, scales_name, bias, "", global_scale
        zero_points = ""
        if parts[0][0].zero_points is not None:
            zero_points = g.initializer(name + ".zero_points",
                                        np.stack([self._rows([q.zero_points for q in p]) for p in parts]))
        return codes_name, g.initializer(name + ".scales", scales), bias, zero_points, ""

    def _qmoe(self, base, prefix, x, logits, router_weights, fc1, fc2, attrs):
        w1, s1, b1, z1, gs1 = self._quantized(f"{prefix}.gate_up_proj", fc1)
        w2, s2, b2, z2, gs2 = self._quantized(f"{prefix}.down_proj", fc2)
        inputs = [x, logits, w1, s1, b1, w2, s2, b2, "", "", "", z1, z2, "", router_weights, gs1, gs2]
        while inputs[-1] == "":
            inputs.pop()
        fmt = self.opts.expert_format
        if fmt == "mxfp4":
            attrs.update(quant_type="fp4", expert_weight_bits=4, block_size=32)
        else:
            attrs.update(quant_type="int", expert_weight_bits=self.opts.bits, block_size=self.opts.block_size)
        return self.g.node("QMoE", inputs, f"{base}/QMoE", domain="com.microsoft", **attrs)
