"""The project's small default model: a Llama-architecture decoder in plain PyTorch.

RMSNorm (no bias), rotary position embedding in Hugging Face's non-interleaved "rotate half"
form, grouped-query attention, SwiGLU MLP, tied input/output embeddings, no biases anywhere.
Module names equal Hugging Face LlamaForCausalLM's, so `state_dict()` keys are the checkpoint
names tools/build_model.py reads (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight,
...); the tied LM head has no tensor of its own.

Also here: the Hugging Face config.json for a shape, and float16 safetensors shards.
"""
import dataclasses
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class Shape:
    vocab_size: int = 8192
    hidden_size: int = 320
    num_attention_heads: int = 5
    num_key_value_heads: int = 1
    num_hidden_layers: int = 8
    intermediate_size: int = 864
    max_position_embeddings: int = 512
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def validate(self):
        if self.hidden_size % self.num_attention_heads or self.head_dim % 2:
            raise ValueError(f"hidden_size {self.hidden_size} must split into {self.num_attention_heads} "
                             "even-sized heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.num_attention_heads} heads do not group over {self.num_key_value_heads} kv heads")


TINY = dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=2,
            intermediate_size=176, max_position_embeddings=128)
# The speculative-decoding target the default model drafts for (same tokenizer and corpus):
# 94.4M parameters, 8.4x the default shape.
TARGET = dict(hidden_size=768, num_attention_heads=12, num_key_value_heads=4, num_hidden_layers=14,
              intermediate_size=2048)


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotary_tables(shape):
    """cos, sin [max_position_embeddings, head_dim]: each frequency theta^(-2i/d) used by dims i and i + d/2."""
    inv_freq = 1.0 / shape.rope_theta ** (torch.arange(0, shape.head_dim, 2, dtype=torch.float64) / shape.head_dim)
    angles = torch.outer(torch.arange(shape.max_position_embeddings, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


class Attention(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape
        d, hd = shape.hidden_size, shape.head_dim
        self.q_proj = nn.Linear(d, shape.num_attention_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, shape.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, shape.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(shape.num_attention_heads * hd, d, bias=False)

    def forward(self, x, cos, sin):
        batch, length, _ = x.shape
        s = self.shape
        q = self.q_proj(x).view(batch, length, s.num_attention_heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, s.num_key_value_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, s.num_key_value_heads, s.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = s.num_attention_heads // s.num_key_value_heads  # query head h reads kv head h // group
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0
            scores = q @ k.transpose(-1, -2) / math.sqrt(s.head_dim)
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            context = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        return self.o_proj(context.transpose(1, 2).reshape(batch, length, -1))


class MLP(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.up_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.down_proj = nn.Linear(shape.intermediate_size, shape.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.mlp = MLP(shape)

    def forward(self, x, cos, sin, dropout=0.0):
        """`dropout`: residual dropout while training (the corpus is small enough to memorise)."""
        x = x + F.dropout(self.self_attn(self.input_layernorm(x), cos, sin), dropout, self.training)
        return x + F.dropout(self.mlp(self.post_attention_layernorm(x)), dropout, self.training)


class Backbone(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.num_hidden_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, shape):
        super().__init__()
        shape.validate()
        self.shape = shape
        self.dropout = 0.0  # training only; not part of the exported model
        self.model = Backbone(shape)
        cos, sin = rotary_tables(shape)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self, std=0.02):
        """GPT-2 style: N(0, std) everywhere, residual writers (o_proj, down_proj) shrunk by sqrt(2 * layers)."""
        residual_std = std / math.sqrt(2 * self.shape.num_hidden_layers)
        for name, param in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                nn.init.ones_(param)
            else:
                residual_writer = name.endswith(("o_proj.weight", "down_proj.weight"))
                nn.init.normal_(param, 0.0, residual_std if residual_writer else std)

    def forward(self, ids):
        """ids [batch, length] -> logits [batch, length, vocab]."""
        length = ids.shape[1]
        cos, sin = self.rope_cos[:length].to(torch.float32), self.rope_sin[:length].to(torch.float32)
        x = F.dropout(self.model.embed_tokens(ids), self.dropout, self.training)
        for layer in self.model.layers:
            x = layer(x, cos, sin, self.dropout)
        return F.linear(self.model.norm(x), self.model.embed_tokens.weight)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


def hf_config(shape, eos_id):
    """config.json as Hugging Face LlamaForCausalLM writes it."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "num_hidden_layers": shape.num_hidden_layers,
        "head_dim": shape.head_dim,
        "vocab_size": shape.vocab_size,
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "rope_scaling": None,
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "initializer_range": 0.02,
        "torch_dtype": "float16",
        "use_cache": True,
    }


def shape_from_config(config):
    fields = {f.name for f in dataclasses.fields(Shape)}
    return Shape(**{k: v for k, v in config.items() if k in fields})


def write_safetensors_shards(out_dir, tensors, max_shard_bytes=15_000_000):
    """float16 model-0000i-of-0000K.safetensors shards (tensors kept whole, in order) and the
    Hugging Face model.safetensors.index.json; returns the shard file names."""
    arrays = {name: np.ascontiguousarray(t.detach().to("cpu", torch.float16).numpy()) for name, t in tensors.items()}
    shards, current, size = [], {}, 0
    for name, array in arrays.items():
        if current and size + array.nbytes > max_shard_bytes - 65536:  # leave room for the header
            shards.append(current)
            current, size = {}, 0
        current[name] = array
        size += array.nbytes
    shards.append(current)
    names, weight_map = [], {}
    for index, shard in enumerate(shards):
        file = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        _write_safetensors(os.path.join(out_dir, file), shard)
        names.append(file)
        weight_map.update({name: file for name in shard})
    total = sum(a.nbytes for a in arrays.values())
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return names


def _write_safetensors(path, arrays):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in arrays.items():
        header[name] = {"dtype": "F16", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format keeps the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for array in arrays.values():
            f.write(array.tobytes())


def load_checkpoint(checkpoint_dir, dtype=torch.float32):
    """(model, config dict) from config.json and the .safetensors shards in checkpoint_dir."""
    sys.path.insert(0, TOOLS_DIR)
    from model_builder.weights import read_safetensors  # the builder's reader: one format, one parser

    with open(os.path.join(checkpoint_dir, "config.json")) as f:
        config = json.load(f)
    model = LlamaForCausalLM(shape_from_config(config))
    state = {}
    for file in sorted(os.listdir(checkpoint_dir)):
        if file.endswith(".safetensors"):
            state.update(read_safetensors(os.path.join(checkpoint_dir, file)))
    state.pop("lm_head.weight", None)  # tied to the embeddings
    model.load_state_dict({name: torch.from_numpy(array) for name, array in state.items()})
    return model.to(dtype).eval(), config
