"""Rotary position embedding tables (non-interleaved, "rotate half" as in Hugging Face Llama).

Plain RoPE: angle[p, i] = p * theta^(-2i / head_dim). With rope_scaling type "yarn" (gpt-oss),
the inverse frequencies and the factor that multiplies cos and sin are Hugging Face's
`_compute_yarn_parameters`:

    factor      max_position_embeddings / original_max_position_embeddings when the latter is
                given (as Hugging Face does; gpt-oss: 131072 / 4096 = its factor 32), else factor
    low, high   dimension pairs where a wavelength fits beta_fast and beta_slow times into
                original_max_position_embeddings: dim * ln(orig / (beta * 2 pi)) / (2 ln theta),
                floored / ceiled unless truncate is false, clamped to [0, dim - 1]
    inv_freq    per pair i: ramp = clamp((i - low) / (high - low), 0, 1);
                (1 - ramp) / theta^(2i / dim) + ramp / (factor * theta^(2i / dim))
    scaling     attention_factor, else 0.1 * ln(factor) + 1 (with mscale / mscale_all_dim: their
                ratio of such terms), 1 when factor <= 1
"""
import math

import numpy as np


def _mscale(factor, mscale=1.0):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(cfg, inv_freq):
    """(inverse frequencies, cos/sin scaling) of YaRN over plain RoPE's `inv_freq`."""
    s, dim, base = cfg.rope_scaling, cfg.head_dim, cfg.rope_theta
    factor, original = s["factor"], s.get("original_max_position_embeddings")
    if original:
        factor = cfg.max_position_embeddings / original
    else:
        original = cfg.max_position_embeddings
    scaling = s.get("attention_factor")
    if scaling is None:
        mscale, mscale_all_dim = s.get("mscale"), s.get("mscale_all_dim")
        scaling = (_mscale(factor, mscale) / _mscale(factor, mscale_all_dim) if mscale and mscale_all_dim
                   else _mscale(factor))

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(s.get("beta_fast") or 32), correction_dim(s.get("beta_slow") or 1)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / ((high - low) or 0.001), 0, 1)
    return inv_freq / factor * ramp + inv_freq * (1 - ramp), scaling


def frequencies(cfg):
    """(inverse frequencies [head_dim / 2] float64, factor on cos and sin)."""
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)
    return _yarn(cfg, inv_freq) if cfg.rope_scaling else (inv_freq, 1.0)


def rotary_angles(cfg, positions):
    """angle[p, i] = position_p * inv_freq[i] for i < head_dim / 2, in float64."""
    return np.outer(np.asarray(positions, dtype=np.float64), frequencies(cfg)[0])


def half_tables(cfg):
    """cos and sin [max_position_embeddings, head_dim / 2] (times YaRN's scaling): the caches
    GroupQueryAttention, com.microsoft.RotaryEmbedding and ONNX RotaryEmbedding read."""
    angles = rotary_angles(cfg, np.arange(cfg.max_position_embeddings))
    scaling = frequencies(cfg)[1]
    return np.cos(angles) * scaling, np.sin(angles) * scaling


def full_tables(cfg):
    """cos and sin [max_position_embeddings, head_dim], each half repeated (what a
    torch.onnx export of LlamaRotaryEmbedding gathers by position_ids)."""
    cos, sin = half_tables(cfg)
    return np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
