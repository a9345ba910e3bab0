"""Block-wise int4/int8 weight quantization in ONNX Runtime's MatMulNBits layout.

For a weight W [N, K] (torch.nn.Linear's [out, in]), each row is cut into blocks of `block`
values along K (K zero-padded to a whole number of blocks) and every block gets one scale:

    B            uint8 [N, blocks, block * bits / 8]   4-bit: value 2j in the low nibble of byte j
    scales       io dtype [N, blocks]                  (MatMulNBits reads N * blocks values)
    zero_points  uint8 [N, ceil(blocks * bits / 8)]    only when asymmetric; 4-bit: block 2j low nibble

    W[n, k] ~= (q[n, k] - zero_point[n, k // block]) * scale[n, k // block]

Symmetric blocks leave zero_points out: the op's default 2^(bits-1) applies. Their scale maps
the value of largest magnitude onto code 0, so the full signed range [-2^(bits-1), 2^(bits-1))
is used. Asymmetric blocks span [min(0, lo), max(0, hi)]. Scales are rounded to the io dtype
before the codes are chosen, so `dequantize` reproduces exactly what the op computes.

The same B viewed as [N, K * bits / 8] with scales [N, blocks] is GatherBlockQuantized's layout
for an embedding table quantized along its hidden axis (quantize_axis=1), and, stacked over
experts, QMoE's for quant_type "int".

MXFP4 (QMoE quant_type "fp4", what gpt-oss checkpoints ship for their experts): blocks of 32
along K share a power-of-two scale 2^(s - 127) (one float8e8m0 byte s) and each value is an
e2m1 code (sign bit 3, magnitude one of 0, 0.5, 1, 1.5, 2, 3, 4, 6), two per byte, low nibble
first: codes [N, K / 2], scales [N, K / 32].
"""
import dataclasses

import numpy as np

from .weights import lm_head, parallel_map


@dataclasses.dataclass
class QuantizedWeight:
    codes: np.ndarray  # uint8 [N, blocks, block * bits / 8]
    scales: np.ndarray  # io dtype [N, blocks]
    zero_points: np.ndarray  # uint8 [N, ceil(blocks * bits / 8)] or None
    bits: int
    block: int
    k: int  # unpadded K

    @property
    def n(self):
        return self.codes.shape[0]


def _pack_nibbles(values):
    """uint8 values < 16 along the last axis (even length) -> bytes, element 2j in the low nibble."""
    return (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)


def _unpack_nibbles(packed):
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def _block_scales(blocks, bits, symmetric, scale_dtype):
    """(scales rounded to scale_dtype as float64, zero points as int) per block."""
    levels = (1 << bits) - 1
    if symmetric:
        index = np.abs(blocks).argmax(axis=-1)[..., None]
        extreme = np.take_along_axis(blocks, index, axis=-1)[..., 0]
        scales = extreme / -(1 << (bits - 1))
        zero_points = np.full(scales.shape, 1 << (bits - 1), dtype=np.int64)
    else:
        lo = np.minimum(blocks.min(axis=-1), 0.0)
        hi = np.maximum(blocks.max(axis=-1), 0.0)
        scales = (hi - lo) / levels
        zero_points = None
    scales = scales.astype(scale_dtype).astype(np.float64)
    if zero_points is None:
        safe = np.where(scales == 0, 1.0, scales)
        zero_points = np.clip(np.rint(-lo / safe), 0, levels).astype(np.int64)
    return scales, zero_points


def quantize(weight, bits, block, symmetric=True, scale_dtype=np.float32):
    """Quantizes W [N, K] block-wise along K (see the module docstring for the layout)."""
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    if block < 16 or block & (block - 1):
        raise ValueError(f"block size must be a power of two >= 16, got {block}")
    n, k = weight.shape
    blocks_per_row = -(-k // block)
    padded = np.zeros((n, blocks_per_row * block), dtype=np.float64)
    padded[:, :k] = weight
    blocks = padded.reshape(n, blocks_per_row, block)
    scales, zero_points = _block_scales(blocks, bits, symmetric, scale_dtype)
    safe = np.where(scales == 0, 1.0, scales)[..., None]
    codes = np.clip(np.rint(blocks / safe) + zero_points[..., None], 0, (1 << bits) - 1).astype(np.uint8)
    if bits == 4:
        codes = _pack_nibbles(codes)
    packed_zero_points = None
    if not symmetric:
        zp = zero_points.astype(np.uint8)
        if bits == 4:
            if blocks_per_row % 2:
                zp = np.concatenate([zp, np.zeros((n, 1), dtype=np.uint8)], axis=1)
            zp = _pack_nibbles(zp)
        packed_zero_points = zp
    return QuantizedWeight(codes, scales.astype(scale_dtype), packed_zero_points, bits, block, k)


def dequantize(q):
    """W [N, K] float32 as MatMulNBits reconstructs it."""
    codes = _unpack_nibbles(q.codes) if q.bits == 4 else q.codes
    n, blocks_per_row, _ = codes.shape
    if q.zero_points is None:
        zero_points = np.full((n, blocks_per_row), 1 << (q.bits - 1), dtype=np.float64)
    else:
        zp = _unpack_nibbles(q.zero_points) if q.bits == 4 else q.zero_points
        zero_points = zp[:, :blocks_per_row].astype(np.float64)
    scales = q.scales.astype(np.float64)
    values = (codes.astype(np.float64) - zero_points[..., None]) * scales[..., None]
    return values.reshape(n, -1)[:, :q.k].astype(np.float32)


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
MXFP4_BLOCK = 32


@dataclasses.dataclass
class Mxfp4Weight:
    codes: np.ndarray  # uint8 [N, K / 2]
    scales: np.ndarray  # uint8 [N, K / 32], float8e8m0 bytes


def quantize_mxfp4(weight):
    """W [N, K] (K a multiple of 32) -> MXFP4: each block's scale is the smallest power of two
    that brings its largest magnitude within e2m1's 6, each value the nearest e2m1 code."""
    n, k = weight.shape
    if k % MXFP4_BLOCK:
        raise ValueError(f"MXFP4 needs K to be a multiple of {MXFP4_BLOCK}, got {k}")
    blocks = weight.astype(np.float64).reshape(n, k // MXFP4_BLOCK, MXFP4_BLOCK)
    amax = np.abs(blocks).max(axis=-1)
    exponent = np.ceil(np.log2(np.where(amax > 0, amax, 1.0) / E2M1[-1]))
    exponent = np.clip(np.where(amax > 0, exponent, -127), -127, 127)
    scaled = blocks / 2.0 ** exponent[..., None]
    index = np.abs(np.abs(scaled)[..., None] - E2M1).argmin(axis=-1)
    nibbles = (index | np.where(scaled < 0, 8, 0)).astype(np.uint8).reshape(n, k)
    return Mxfp4Weight(_pack_nibbles(nibbles), (exponent + 127).astype(np.uint8))


def dequantize_mxfp4(q):
    nibbles = _unpack_nibbles(q.codes)
    values = E2M1[nibbles & 7] * np.where(nibbles & 8, -1.0, 1.0)
    n, k = values.shape
    scale = 2.0 ** (q.scales.astype(np.float64) - 127)
    return (values.reshape(n, -1, MXFP4_BLOCK) * scale[..., None]).reshape(n, k).astype(np.float32)


def _is_expert(name):
    return ".mlp.experts." in name and name.endswith("_proj.weight")


def quantized_experts(cfg, weights, opts):
    """{canonical name: QuantizedWeight or Mxfp4Weight} for every expert projection when the
    experts are quantized (QMoE), else {}."""
    fmt = opts.expert_format
    if fmt == "float":
        return {}
    names = [n for n in weights if _is_expert(n)]
    if fmt == "mxfp4":
        stored = getattr(weights, "mxfp4", {})  # a checkpoint's own codes, kept byte for byte
        def convert(name):
            return stored[name] if name in stored else quantize_mxfp4(weights[name])
    else:
        bits = {"int4": 4, "int8": 8}[fmt]
        def convert(name):
            return quantize(weights[name], bits, opts.block_size, opts.symmetric, opts.float_dtype)
    return dict(zip(names, parallel_map(convert, names)))


def quantized_tensors(cfg, weights, opts):
    """{canonical name: QuantizedWeight} for everything the genai style quantizes: the layers'
    projections, the LM head ("lm_head.weight", which is the embedding table when tied) and,
    with quantized embeddings, "model.embed_tokens.weight" (the very same object when tied)."""
    if opts.bits is None:
        return {}
    tensors = {n: w for n, w in weights.items() if n.endswith("_proj.weight") and not _is_expert(n)}
    tensors["lm_head.weight"] = lm_head(cfg, weights)
    if opts.quantize_embeddings and not cfg.tie_word_embeddings:
        tensors["model.embed_tokens.weight"] = weights["model.embed_tokens.weight"]
    names = list(tensors)
    quantized = dict(zip(names, parallel_map(
        lambda name: quantize(tensors[name], opts.bits, opts.block_size, opts.symmetric, opts.float_dtype), names)))
    if opts.quantize_embeddings and cfg.tie_word_embeddings:
        quantized["model.embed_tokens.weight"] = quantized["lm_head.weight"]
    return quantized


def effective_weights(cfg, weights, opts):
    """The weights a built model really computes with: quantized tensors replaced by their
    dequantized values, and an explicit "lm_head.weight" even when tied."""
    effective = dict(weights)
    effective["lm_head.weight"] = lm_head(cfg, weights)
    for name, q in quantized_tensors(cfg, weights, opts).items():
        effective[name] = dequantize(q)
    for name, q in quantized_experts(cfg, weights, opts).items():
        effective[name] = dequantize_mxfp4(q) if isinstance(q, Mxfp4Weight) else dequantize(q)
    return effective
