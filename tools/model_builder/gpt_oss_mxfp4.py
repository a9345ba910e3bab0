"""gpt-oss's MXFP4 expert tensors, read as they are (no dequantise and requantise round trip).

The published checkpoints (gpt-oss-20b / 120b safetensors) store each MoE layer's experts as

    mlp.experts.gate_up_proj_blocks  uint8 [E, 2I, hidden / 32, 16]   rows: gate 0, up 0, gate 1, ...
    mlp.experts.gate_up_proj_scales  uint8 [E, 2I, hidden / 32]       e8m0: 2^(s - 127)
    mlp.experts.down_proj_blocks     uint8 [E, hidden, I / 32, 16]
    mlp.experts.down_proj_scales     uint8 [E, hidden, I / 32]
    (the _bias tensors are plain floats)

a row per output, 32 e2m1 values per block, element 2j of a block in the low nibble of byte j:
exactly QMoE quant_type "fp4"'s [E, N, K / 2] codes and [E, N, K / 32] scales, and fc1's
interleaved gate / up rows are swiglu_fusion 1. So the bytes are split per expert unchanged
(Mxfp4Weight), and also dequantised into the dense stacks Hugging Face's dequantising loader makes
(gate_up_proj [E, hidden, 2I], down_proj [E, I, hidden]) for every other use of the weights.
"""
import numpy as np

from .quantize import Mxfp4Weight, dequantize_mxfp4

BLOCK_BYTES = 16  # 32 e2m1 values
_ROWS = {"gate_up_proj": (("gate_proj", slice(0, None, 2)), ("up_proj", slice(1, None, 2))),
         "down_proj": (("down_proj", slice(None)),)}


def _packed(checkpoint, name):
    """(codes [E, N, K / 2], scales [E, N, K / 32]) of one stacked projection, or None."""
    blocks, scales = checkpoint.pop(name + "_blocks", None), checkpoint.pop(name + "_scales", None)
    if blocks is None and scales is None:
        return None
    if blocks is None or scales is None:
        raise ValueError(f"{name}: checkpoint has one of _blocks and _scales without the other")
    blocks, scales = np.asarray(blocks), np.asarray(scales)
    if blocks.dtype != np.uint8 or scales.dtype != np.uint8:
        raise ValueError(f"{name}_blocks / _scales must be U8, got {blocks.dtype} / {scales.dtype}")
    if blocks.ndim != 4 or blocks.shape[-1] != BLOCK_BYTES or blocks.shape[:-1] != scales.shape:
        raise ValueError(f"{name}_blocks {list(blocks.shape)} should be [experts, rows, blocks, {BLOCK_BYTES}] "
                         f"over {name}_scales {list(scales.shape)}")
    e, n, groups = scales.shape
    return blocks.reshape(e, n, groups * BLOCK_BYTES), scales


def unpack_experts(checkpoint, prefix, packed):
    """Replaces `prefix`'s gate_up_proj / down_proj _blocks and _scales in `checkpoint` by their
    dense stacks; puts each expert's codes, as stored, into `packed` under canonical names."""
    for proj, parts in _ROWS.items():
        stacked = _packed(checkpoint, prefix + proj)
        if stacked is None:
            continue
        codes, scales = stacked
        dense = []
        for e in range(codes.shape[0]):
            for name, rows in parts:
                packed[f"{prefix}{e}.{name}.weight"] = Mxfp4Weight(codes[e, rows], scales[e, rows])
            dense.append(dequantize_mxfp4(Mxfp4Weight(codes[e], scales[e])).T)
        checkpoint[prefix + proj] = np.stack(dense)
