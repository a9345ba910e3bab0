"""Reference forward pass in PyTorch, written from the model's definition, not from any graph.

One unpadded sequence at a time, no KV cache: every position's logits come from one causal pass
over the whole sequence, so comparing them with a runtime's prefill + decode steps checks the
cache, the masks and the positions as well as the arithmetic. Float64 by default.

Mixture-of-experts MLPs route as Hugging Face's modeling files do: Mixtral and Qwen3-MoE take
the softmax over all experts, keep the k largest and (norm_topk_prob) divide by their sum;
gpt-oss keeps the k largest logits (router bias included) and takes their softmax. Each chosen
expert computes down(act(gate x, up x)) with act(g, u) = g' * sigmoid(alpha * g') * (u' + beta),
g' = min(g, limit), u' = clamp(u, -limit, limit): SiLU gating for alpha 1, beta 0 and no limit,
gpt-oss's clamped variant for 1.702, 1 and 7.
"""
import json
import os

import numpy as np

from . import rope


def _torch():
    import torch  # only the reference needs PyTorch

    return torch


def _rms_norm(torch, x, scale, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * scale


def _rotate(torch, x, cos, sin):
    """x [L, heads, hd]; cos, sin [L, hd / 2]."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class ReferenceModel:
    def __init__(self, cfg, weights, dtype="float64"):
        torch = self.torch = _torch()
        self.cfg = cfg
        self.dtype = getattr(torch, dtype)
        self.w = {name: torch.from_numpy(np.asarray(value, dtype=np.float64)).to(self.dtype)
                  for name, value in weights.items()}

    def norm(self, x, name):
        scale = self.w[name] + self.cfg.norm_weight_offset
        return _rms_norm(self.torch, x, scale, self.cfg.rms_norm_eps)

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def attention(self, i, x, cos, sin):
        cfg, torch = self.cfg, self.torch
        prefix = f"model.layers.{i}.self_attn"
        length = x.shape[0]
        q = self.linear(x, f"{prefix}.q_proj").reshape(length, cfg.num_attention_heads, cfg.head_dim)
        k = self.linear(x, f"{prefix}.k_proj").reshape(length, cfg.num_key_value_heads, cfg.head_dim)
        v = self.linear(x, f"{prefix}.v_proj").reshape(length, cfg.num_key_value_heads, cfg.head_dim)
        if cfg.qk_norm:
            q = self.norm(q, f"{prefix}.q_norm.weight")
            k = self.norm(k, f"{prefix}.k_norm.weight")
        q, k = _rotate(torch, q, cos, sin), _rotate(torch, k, cos, sin)
        k = k.repeat_interleave(cfg.group_size, dim=1)  # query head h reads kv head h // group_size
        v = v.repeat_interleave(cfg.group_size, dim=1)
        scores = torch.einsum("ihd,jhd->hij", q, k) / np.sqrt(cfg.head_dim)
        if cfg.attn_logit_softcapping:
            scores = cfg.attn_logit_softcapping * torch.tanh(scores / cfg.attn_logit_softcapping)
        query = torch.arange(length)[:, None]
        key = torch.arange(length)[None, :]
        visible = key <= query
        window = cfg.layer_window(i)
        if window:
            visible &= key > query - window
        scores = scores.masked_fill(~visible, float("-inf"))
        if cfg.attention_sinks:  # a per-head logit joins every row's softmax, then is dropped
            sinks = self.w[f"{prefix}.sinks"][:, None, None].expand(-1, length, 1)
            probs = torch.softmax(torch.cat([scores, sinks], dim=-1), dim=-1)[..., :-1]
        else:
            probs = torch.softmax(scores, dim=-1)
        context = torch.einsum("hij,jhd->ihd", probs, v)
        return self.linear(context.reshape(length, cfg.q_size), f"{prefix}.o_proj")

    def mlp(self, i, x):
        torch, prefix = self.torch, f"model.layers.{i}.mlp"
        gate = self.linear(x, f"{prefix}.gate_proj")
        if self.cfg.hidden_act == "silu":
            act = torch.nn.functional.silu(gate)
        else:
            act = torch.nn.functional.gelu(gate, approximate="tanh")
        return self.linear(act * self.linear(x, f"{prefix}.up_proj"), f"{prefix}.down_proj")

    def moe(self, i, x):
        """The mixture-of-experts MLP of layer i over x [L, hidden]."""
        cfg, torch, prefix = self.cfg, self.torch, f"model.layers.{i}.mlp"
        logits = self.linear(x, f"{prefix}.gate")
        if cfg.moe_routing == "topk_softmax":
            top, experts = torch.topk(logits, cfg.num_experts_per_tok, dim=-1)
            weights = torch.softmax(top, dim=-1)
        else:
            weights, experts = torch.topk(torch.softmax(logits, dim=-1), cfg.num_experts_per_tok, dim=-1)
            if cfg.norm_topk_prob:
                weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(cfg.num_experts):
            rows, rank = torch.nonzero(experts == e, as_tuple=True)
            if len(rows) == 0:
                continue
            expert = f"{prefix}.experts.{e}"
            gate, up = self.linear(x[rows], f"{expert}.gate_proj"), self.linear(x[rows], f"{expert}.up_proj")
            if cfg.swiglu_limit is not None:
                gate = gate.clamp(max=cfg.swiglu_limit)
                up = up.clamp(-cfg.swiglu_limit, cfg.swiglu_limit)
            act = gate * torch.sigmoid(cfg.swiglu_alpha * gate) * (up + cfg.swiglu_beta)
            out.index_add_(0, rows, weights[rows, rank, None] * self.linear(act, f"{expert}.down_proj"))
        return out

    def logits(self, tokens):
        """[len(tokens), vocab] float64 numpy: the logits after each token."""
        cfg, torch = self.cfg, self.torch
        ids = torch.tensor(tokens, dtype=torch.long)
        x = self.w["model.embed_tokens.weight"][ids] * cfg.embedding_multiplier
        angles = torch.from_numpy(rope.rotary_angles(cfg, np.arange(len(tokens)))).to(self.dtype)
        scaling = rope.frequencies(cfg)[1]  # YaRN's factor on cos and sin
        cos, sin = torch.cos(angles) * scaling, torch.sin(angles) * scaling
        for i in range(cfg.num_hidden_layers):
            x = x + self.attention(i, self.norm(x, f"model.layers.{i}.input_layernorm.weight"), cos, sin)
            mlp = self.moe if cfg.is_moe_layer(i) else self.mlp
            x = x + mlp(i, self.norm(x, f"model.layers.{i}.post_attention_layernorm.weight"))
        logits = self.norm(x, "model.norm.weight") @ self.w["lm_head.weight"].T
        if cfg.final_logit_softcapping:
            logits = cfg.final_logit_softcapping * torch.tanh(logits / cfg.final_logit_softcapping)
        return logits.to(torch.float64).numpy()


def write_reference(out_dir, model, sequences):
    """Writes row{b}.logits [len, vocab] float32 per token sequence, in ort_run.mjs's folder format."""
    os.makedirs(out_dir, exist_ok=True)
    manifest = []
    for b, tokens in enumerate(sequences):
        logits = model.logits(tokens).astype(np.float32)
        file = f"row{b}.bin"
        logits.tofile(os.path.join(out_dir, file))
        manifest.append({"name": f"row{b}.logits", "dtype": "float32", "dims": list(logits.shape), "file": file})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
