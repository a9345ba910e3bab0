#!/usr/bin/python3
"""Writes a tiny random gpt-oss checkpoint in the published gpt-oss safetensors layout, with
MXFP4 experts, and the same weights dequantised here (independently of tools/model_builder) as a
dense float checkpoint: what tests/genai/moe_generation_test.cc builds from and compares with.

    gpt_oss_mxfp4_checkpoint.py OUT_DIR [--seed N]

OUT_DIR/mxfp4/model-0000{0,1}-of-00002.safetensors (the tools/build_model.py gpt_oss preset's
shapes; layer 0 in the first shard, the rest in the second), per MoE layer:

    mlp.router.weight / .bias           BF16 [E, hidden] / [E]
    mlp.experts.gate_up_proj_blocks     U8   [E, 2I, hidden / 32, 16]  rows gate 0, up 0, gate 1, ...
    mlp.experts.gate_up_proj_scales     U8   [E, 2I, hidden / 32]      e8m0 exponents
    mlp.experts.gate_up_proj_bias       BF16 [E, 2I]
    mlp.experts.down_proj_blocks        U8   [E, hidden, I / 32, 16]
    mlp.experts.down_proj_scales        U8   [E, hidden, I / 32]
    mlp.experts.down_proj_bias          BF16 [E, hidden]

e2m1 values two per byte, element 2j of a block in the low nibble of byte j, scaled by
2^(scale - 127): Hugging Face's convert_moe_packed_tensors. The other tensors are seeded random
float32. OUT_DIR/dense.safetensors holds the same model with gate_up_proj [E, hidden, 2I] and
down_proj [E, I, hidden] as that dequantisation gives them.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

import model_builder  # noqa: E402  (only for the shapes and the seeded dense weights)

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
SAFETENSORS_DTYPE = {np.dtype(np.uint8): "U8", np.dtype(np.uint16): "BF16", np.dtype(np.float32): "F32"}


def bf16(values):
    """(bfloat16 bits as uint16, those values as float32): round to nearest even."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return rounded, (rounded.astype(np.uint32) << 16).view(np.float32)


def dequantise(blocks, scales):
    """[E, N, G, 16] codes, [E, N, G] exponents -> float64 [E, N, G * 32]."""
    values = np.empty(blocks.shape[:-1] + (32,))
    values[..., 0::2], values[..., 1::2] = E2M1[blocks & 0x0F], E2M1[blocks >> 4]
    values = np.ldexp(values, scales.astype(np.int32)[..., None] - 127)
    return values.reshape(*scales.shape[:2], -1)


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, array in tensors.items():
        header[name] = {"dtype": SAFETENSORS_DTYPE[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array).tobytes())


def moe_layer(rng, cfg, prefix):
    """(checkpoint tensors, dense tensors) of one layer's router and experts."""
    e, h, inter = cfg.num_experts, cfg.hidden_size, cfg.moe_inter
    packed, dense = {}, {}
    for name, shape in (("router.weight", (e, h)), ("router.bias", (e,)),
                        ("experts.gate_up_proj_bias", (e, 2 * inter)), ("experts.down_proj_bias", (e, h))):
        scale = 1.0 if name == "router.weight" else 0.1
        packed[prefix + name], dense[prefix + name] = bf16(rng.uniform(-scale, scale, size=shape) / np.sqrt(h))
    for proj, rows, k in (("gate_up_proj", 2 * inter, h), ("down_proj", h, inter)):
        blocks = rng.integers(0, 256, size=(e, rows, k // 32, 16), dtype=np.uint8)
        scales = rng.integers(119, 124, size=(e, rows, k // 32), dtype=np.uint8)
        packed[f"{prefix}experts.{proj}_blocks"], packed[f"{prefix}experts.{proj}_scales"] = blocks, scales
        dense[f"{prefix}experts.{proj}"] = dequantise(blocks, scales).transpose(0, 2, 1).astype(np.float32)
    return packed, dense


def write_checkpoints(out_dir, seed=7):
    cfg = model_builder.load_config("gpt_oss")
    weights = model_builder.load_weights(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    shards = [{}, {}]
    dense = {n: a for n, a in weights.items() if ".mlp." not in n}
    for name, array in dense.items():
        shards[0 if ".layers.0." in name or "embed" in name else 1][name] = array
    for i in range(cfg.num_hidden_layers):
        packed, floats = moe_layer(rng, cfg, f"model.layers.{i}.mlp.")
        shards[min(i, 1)].update(packed)
        dense.update(floats)
    os.makedirs(os.path.join(out_dir, "mxfp4"), exist_ok=True)
    for s, tensors in enumerate(shards):
        write_safetensors(os.path.join(out_dir, "mxfp4", f"model-{s:05d}-of-00002.safetensors"), tensors)
    write_safetensors(os.path.join(out_dir, "dense.safetensors"), dense)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    write_checkpoints(args.out_dir, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
