"""Rotary position embedding tables (non-interleaved, "rotate half" as in Hugging Face Llama)."""
import numpy as np


def rotary_angles(cfg, positions):
    """angle[p, i] = position_p * theta^(-2i / head_dim) for i < head_dim / 2, in float64."""
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)
    return np.outer(np.asarray(positions, dtype=np.float64), inv_freq)


def half_tables(cfg):
    """cos and sin [max_position_embeddings, head_dim / 2]: the caches GroupQueryAttention,
    com.microsoft.RotaryEmbedding and ONNX RotaryEmbedding read."""
    angles = rotary_angles(cfg, np.arange(cfg.max_position_embeddings))
    return np.cos(angles), np.sin(angles)


def full_tables(cfg):
    """cos and sin [max_position_embeddings, head_dim], each half repeated (what a
    torch.onnx export of LlamaRotaryEmbedding gathers by position_ids)."""
    cos, sin = half_tables(cfg)
    return np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
