"""Model weights as float32 numpy arrays under Hugging Face Llama names.

Weights come from a seed (`random_weights`) or a checkpoint (`load_checkpoint`: safetensors or a
PyTorch state_dict). Either way they are checked against the config and brought to one canonical
form that every graph style and the reference forward read:

    model.embed_tokens.weight                          [vocab, hidden]
    model.layers.{i}.input_layernorm.weight            [hidden]       (stored form: see norm offset)
    model.layers.{i}.self_attn.{q,k,v}_proj.weight     [q_size|kv_size, hidden]  (+ .bias)
    model.layers.{i}.self_attn.{q,k}_norm.weight       [head_dim]
    model.layers.{i}.self_attn.o_proj.weight           [hidden, q_size]
    model.layers.{i}.post_attention_layernorm.weight   [hidden]
    model.layers.{i}.mlp.{gate,up}_proj.weight         [intermediate, hidden]
    model.layers.{i}.mlp.down_proj.weight              [hidden, intermediate]
    mixture-of-experts layers instead (E = num_experts, I = moe_intermediate_size):
    model.layers.{i}.mlp.gate.weight                   [E, hidden]  the router (+ .bias [E], gpt-oss)
    model.layers.{i}.mlp.experts.{e}.{gate,up}_proj.weight  [I, hidden]   (+ .bias, gpt-oss)
    model.layers.{i}.mlp.experts.{e}.down_proj.weight  [hidden, I]
    model.layers.{i}.self_attn.o_proj.bias             [hidden]     (gpt-oss)
    model.layers.{i}.self_attn.sinks                   [heads]      attention sink logits (gpt-oss)
    model.norm.weight                                  [hidden]
    lm_head.weight                                     [vocab, hidden]  (absent when tied)

Fused checkpoints (Phi-3's qkv_proj and gate_up_proj) are split on load. Linear weights are
[out, in] as in torch.nn.Linear. Mixture-of-experts checkpoints are renamed on load: Mixtral's
block_sparse_moe.gate and experts.{e}.w1 / w3 / w2 (gate, up, down), gpt-oss's mlp.router and
its stacked experts (gate_up_proj [E, hidden, 2I] with gate and up interleaved along the last
axis, down_proj [E, I, hidden], each with a _bias), or its MXFP4 *_blocks / *_scales
(gpt_oss_mxfp4.py): dequantised here, and kept as stored in the `Weights.mxfp4` that a build with
--moe-weights mxfp4 writes unchanged.
"""
import concurrent.futures
import json
import os
import struct

import numpy as np


def _layer(i, suffix):
    return f"model.layers.{i}.{suffix}"


def checkpoint_layout(cfg):
    """[(name, shape, init)] in the checkpoint's own (possibly fused) form, in a fixed order.

    init is 'embedding', 'linear', 'bias', 'norm' or 'sink'; the order fixes which random numbers each
    tensor gets, so one seed gives the same weights whatever graph style is built."""
    h, kv, q, inter = cfg.hidden_size, cfg.kv_size, cfg.q_size, cfg.intermediate_size
    layout = [("model.embed_tokens.weight", (cfg.vocab_size, h), "embedding")]
    for i in range(cfg.num_hidden_layers):
        layout.append((_layer(i, "input_layernorm.weight"), (h,), "norm"))
        if cfg.fused_weights:
            layout.append((_layer(i, "self_attn.qkv_proj.weight"), (q + 2 * kv, h), "linear"))
        else:
            for proj, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
                layout.append((_layer(i, f"self_attn.{proj}.weight"), (rows, h), "linear"))
        if cfg.attention_bias:
            for proj, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
                layout.append((_layer(i, f"self_attn.{proj}.bias"), (rows,), "bias"))
        if cfg.qk_norm:
            layout.append((_layer(i, "self_attn.q_norm.weight"), (cfg.head_dim,), "norm"))
            layout.append((_layer(i, "self_attn.k_norm.weight"), (cfg.head_dim,), "norm"))
        layout.append((_layer(i, "self_attn.o_proj.weight"), (h, q), "linear"))
        if cfg.o_proj_bias:
            layout.append((_layer(i, "self_attn.o_proj.bias"), (h,), "bias"))
        if cfg.attention_sinks:
            layout.append((_layer(i, "self_attn.sinks"), (cfg.num_attention_heads,), "sink"))
        layout.append((_layer(i, "post_attention_layernorm.weight"), (h,), "norm"))
        if cfg.is_moe_layer(i):
            layout += _moe_layout(cfg, i)
            continue
        if cfg.fused_weights:
            layout.append((_layer(i, "mlp.gate_up_proj.weight"), (2 * inter, h), "linear"))
        else:
            layout.append((_layer(i, "mlp.gate_proj.weight"), (inter, h), "linear"))
            layout.append((_layer(i, "mlp.up_proj.weight"), (inter, h), "linear"))
        layout.append((_layer(i, "mlp.down_proj.weight"), (h, inter), "linear"))
    layout.append(("model.norm.weight", (h,), "norm"))
    if not cfg.tie_word_embeddings:
        layout.append(("lm_head.weight", (cfg.vocab_size, h), "linear"))
    return layout


def _moe_layout(cfg, i):
    h, inter, experts = cfg.hidden_size, cfg.moe_inter, cfg.num_experts
    layout = [(_layer(i, "mlp.gate.weight"), (experts, h), "linear")]
    if cfg.moe_bias:
        layout.append((_layer(i, "mlp.gate.bias"), (experts,), "bias"))
    for e in range(experts):
        for proj, shape in (("gate_proj", (inter, h)), ("up_proj", (inter, h)), ("down_proj", (h, inter))):
            layout.append((_layer(i, f"mlp.experts.{e}.{proj}.weight"), shape, "linear"))
            if cfg.moe_bias:
                layout.append((_layer(i, f"mlp.experts.{e}.{proj}.bias"), shape[:1], "bias"))
    return layout


def random_weights(cfg, seed):
    """Seeded normals scaled so activations stay O(1) and logits are well separated.

    Linear weights ~ N(0, 1/fan_in) keep each projection's output at unit scale; the projections
    that write into the residual stream (o_proj, down_proj) get twice that, so the layers, not
    the token's own embedding, dominate it; otherwise a tied LM head mostly predicts the input
    token again. Embedding rows have unit norm (after Gemma's multiplier); norm scales are 1 + N(0, 0.1^2) (stored minus
    the config's norm offset).

    Each tensor draws from its own stream, seeded by (seed, its place in the layout), so tensors
    are drawn in parallel (numpy fills arrays without the GIL): a 7B-parameter model in seconds
    per core rather than minutes."""
    def draw(index, name, shape, init):
        values = np.random.default_rng([seed, index]).standard_normal(shape, dtype=np.float32)
        if init == "linear":
            residual_writer = name.endswith(("o_proj.weight", "down_proj.weight"))
            values *= np.float32((2.0 if residual_writer else 1.0) / np.sqrt(shape[1]))
        elif init == "embedding":
            values /= np.float32(np.sqrt(shape[1]) * cfg.embedding_multiplier)
        elif init == "bias":
            values *= np.float32(0.1)
        elif init == "sink":  # unit-scale logits, like the scores they join
            pass
        elif init == "norm":
            values = (np.float32(1.0 - cfg.norm_weight_offset) + np.float32(0.1) * values).astype(np.float32)
        return name, values

    layout = checkpoint_layout(cfg)
    return canonicalize(cfg, dict(parallel_map(lambda entry: draw(entry[0], *entry[1]), enumerate(layout))))


def parallel_map(function, items):
    """[function(item)] computed on a thread per core (for numpy work that releases the GIL)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(function, items))


_MOE_RENAMES = ((".block_sparse_moe.gate.", ".mlp.gate."), (".mlp.router.", ".mlp.gate."),
                (".block_sparse_moe.experts.", ".mlp.experts."), (".w1.", ".gate_proj."), (".w3.", ".up_proj."),
                (".w2.", ".down_proj."))


class Weights(dict):
    """Canonical float32 weights; `mxfp4` holds {canonical expert name: Mxfp4Weight} for the
    experts a checkpoint stored in MXFP4, whose floats here are those codes dequantised."""

    def __init__(self, *args, mxfp4=None):
        super().__init__(*args)
        self.mxfp4 = mxfp4 or {}


def _rename_moe(cfg, checkpoint, mxfp4):
    """Mixtral's and gpt-oss's expert names (see the module docstring) as the canonical ones."""
    if not cfg.num_experts:
        return checkpoint
    from .gpt_oss_mxfp4 import unpack_experts  # imports quantize, which imports this module

    renamed = {}
    for name, array in checkpoint.items():
        if ".experts." in name or ".mlp.router." in name or ".block_sparse_moe." in name:
            for old, new in _MOE_RENAMES:
                name = name.replace(old, new)
        renamed[name] = array
    for i in range(cfg.num_hidden_layers):
        unpack_experts(renamed, _layer(i, "mlp.experts."), mxfp4)
        _split_stacked_experts(renamed, _layer(i, "mlp.experts."))
    return renamed


def _split_stacked_experts(weights, prefix):
    """gpt-oss's [E, in, out] stacks (gate and up interleaved) -> per-expert [out, in] tensors."""
    if prefix + "gate_up_proj" not in weights:
        return
    gate_up, down = np.asarray(weights.pop(prefix + "gate_up_proj")), np.asarray(weights.pop(prefix + "down_proj"))
    gate_up_bias, down_bias = weights.pop(prefix + "gate_up_proj_bias", None), weights.pop(prefix + "down_proj_bias", None)
    for e in range(gate_up.shape[0]):
        parts = {"gate_proj": (gate_up[e, :, 0::2].T, None if gate_up_bias is None else gate_up_bias[e, 0::2]),
                 "up_proj": (gate_up[e, :, 1::2].T, None if gate_up_bias is None else gate_up_bias[e, 1::2]),
                 "down_proj": (down[e].T, None if down_bias is None else down_bias[e])}
        for proj, (weight, bias) in parts.items():
            weights[f"{prefix}{e}.{proj}.weight"] = np.ascontiguousarray(weight)
            if bias is not None:
                weights[f"{prefix}{e}.{proj}.bias"] = np.asarray(bias)


def canonicalize(cfg, checkpoint):
    """Checks names and shapes against the config; splits fused tensors; returns the canonical dict."""
    mxfp4 = {}
    checkpoint = _rename_moe(cfg, checkpoint, mxfp4)
    expected = checkpoint_layout(cfg)
    wanted = {name for name, _, _ in expected}
    tied_extra = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    unknown = sorted(set(checkpoint) - wanted - tied_extra)
    if unknown:
        raise ValueError(f"checkpoint has tensors this config does not use: {', '.join(unknown[:8])}")
    weights = {}
    for name, shape, _ in expected:
        if name not in checkpoint:
            raise ValueError(f"checkpoint lacks {name} {list(shape)}")
        array = np.asarray(checkpoint[name], dtype=np.float32)
        if array.shape != tuple(shape):
            raise ValueError(f"{name} has shape {list(array.shape)}, config wants {list(shape)}")
        weights[name] = array
    if cfg.fused_weights:
        _split_fused(cfg, weights)
    return Weights(weights, mxfp4=mxfp4)


def _split_fused(cfg, weights):
    for i in range(cfg.num_hidden_layers):
        qkv = weights.pop(_layer(i, "self_attn.qkv_proj.weight"))
        q_end, k_end = cfg.q_size, cfg.q_size + cfg.kv_size
        weights[_layer(i, "self_attn.q_proj.weight")] = qkv[:q_end]
        weights[_layer(i, "self_attn.k_proj.weight")] = qkv[q_end:k_end]
        weights[_layer(i, "self_attn.v_proj.weight")] = qkv[k_end:]
        gate_up = weights.pop(_layer(i, "mlp.gate_up_proj.weight"))
        weights[_layer(i, "mlp.gate_proj.weight")] = gate_up[:cfg.intermediate_size]
        weights[_layer(i, "mlp.up_proj.weight")] = gate_up[cfg.intermediate_size:]


def _fuse(cfg, weights):
    """The checkpoint form of canonical weights (Phi-3's fused tensors put back together)."""
    fused = dict(weights)
    if not cfg.fused_weights:
        return fused
    for i in range(cfg.num_hidden_layers):
        parts = [fused.pop(_layer(i, f"self_attn.{p}_proj.weight")) for p in "qkv"]
        fused[_layer(i, "self_attn.qkv_proj.weight")] = np.concatenate(parts)
        parts = [fused.pop(_layer(i, f"mlp.{p}_proj.weight")) for p in ("gate", "up")]
        fused[_layer(i, "mlp.gate_up_proj.weight")] = np.concatenate(parts)
    return fused


def write_safetensors(path, cfg, weights, dtype="F32"):
    """Writes canonical weights as a .safetensors checkpoint in the config's own layout, in float32
    or (dtype "F16": half the bytes, what an fp16 model computes with anyway) float16."""
    np_dtype = _SAFETENSORS_DTYPES[dtype]
    tensors = _fuse(cfg, weights)
    header, offset = {}, 0
    for name, array in tensors.items():
        nbytes = array.size * np.dtype(np_dtype).itemsize
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format keeps the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array, dtype=np_dtype).tobytes())


def lm_head(cfg, weights):
    """[vocab, hidden]: the embedding table when tied."""
    return weights["model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"]


def norm_scale(cfg, stored):
    """The scale a norm applies, from its stored weight (Gemma stores scale - 1)."""
    return (stored.astype(np.float64) + cfg.norm_weight_offset).astype(np.float32)


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16, "U8": np.uint8}


def read_safetensors(path):
    """{name: array} from a .safetensors file (8-byte header size, JSON header, raw data): float
    tensors as float32, U8 ones (gpt-oss's MXFP4 codes and scales) as they are."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (header_size,) = struct.unpack("<Q", blob[:8])
    if 8 + header_size > len(blob):
        raise ValueError(f"{path}: header of {header_size} bytes runs past the end of the file")
    header = json.loads(blob[8:8 + header_size])
    data = memoryview(blob)[8 + header_size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name} offsets [{begin}, {end}) outside the data")
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":  # bfloat16 is the high half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array if info["dtype"] == "U8" else array.astype(np.float32)
    return tensors


def read_state_dict(path):
    """{name: float32 array} from a torch.save'd state_dict (.pt / .bin)."""
    import torch  # only this loader needs PyTorch

    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.detach().to(torch.float32).numpy() for name, tensor in state.items()}


def load_checkpoint(cfg, path):
    """A .safetensors file, a folder of them (a sharded checkpoint), or a torch state_dict file."""
    if os.path.isdir(path):
        shards = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if not shards:
            raise ValueError(f"{path} holds no .safetensors files")
        raw = {}
        for shard in shards:
            raw.update(read_safetensors(os.path.join(path, shard)))
    elif path.endswith(".safetensors"):
        raw = read_safetensors(path)
    else:
        raw = read_state_dict(path)
    return canonicalize(cfg, raw)
