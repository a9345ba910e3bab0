"""Rotary position embeddings: com.microsoft RotaryEmbedding (3D packed-heads or 4D input,
position_ids as a (1) offset or per token, full or partial rotary with num_heads) and the ONNX
opset-23 RotaryEmbedding (4D or 3D input, caches indexed by position_ids or given per token).
Both halves and interleaved pairs. Caches hold real cos/sin tables (theta 10000 or 1e6).
"""
import numpy as np

from case_util import Case, float_type, uniform


def rope_tables(rng, positions, rotary_dim, fdt):
    """cos/sin tables of shape positions.shape + (rotary_dim / 2)."""
    theta = float(rng.choice([1e4, 1e6]))
    inv_freq = theta ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    angles = np.asarray(positions, dtype=np.float64)[..., None] * inv_freq
    return np.cos(angles).astype(fdt), np.sin(angles).astype(fdt)


def _head_geometry(rng):
    head_size = int(rng.choice([8, 16, 32, 64, 80, 96, 128, 256]))
    num_heads = int(rng.integers(1, 5)) if head_size >= 128 else int(rng.integers(1, 9))
    rotary_dim = head_size
    if rng.random() < 0.3:
        rotary_dim = int(rng.choice([head_size // 2, head_size // 4])) // 2 * 2  # partial: phi-2, NeoX style
    return head_size, num_heads, rotary_dim


def contrib_rotary(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    head_size, num_heads, rotary_dim = _head_geometry(rng)
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 17))
    max_seq = seq + int(rng.integers(0, 48))
    four_d = rng.random() < 0.4
    shape = [batch, num_heads, seq, head_size] if four_d else [batch, seq, num_heads * head_size]
    case = Case("RotaryEmbedding", dtype)
    case.add_input("input", uniform(rng, shape, fdt))
    if rng.random() < 0.5:
        offset = int(rng.integers(0, max_seq - seq + 1))
        case.add_input("position_ids", np.array([offset], dtype=np.int64))
        positions = f"offset {offset}"
    else:
        ids = rng.integers(0, max_seq, size=(batch, seq), dtype=np.int64)
        case.add_input("position_ids", ids)
        positions = "per token"
    cos, sin = rope_tables(rng, np.arange(max_seq), rotary_dim, fdt)
    case.add_initializer("cos_cache", cos)
    case.add_initializer("sin_cache", sin)
    case.add_output("output", fdt)
    interleaved = int(rng.integers(0, 2))
    case.attrs = {"interleaved": interleaved}
    if rotary_dim != head_size or (not four_d and rng.random() < 0.5):
        case.attrs.update(num_heads=num_heads, rotary_embedding_dim=rotary_dim)
    case.describe = (f"input={shape} heads={num_heads}x{head_size} rotary_dim={rotary_dim} max_seq={max_seq} "
                     f"positions={positions} interleaved={interleaved} {dtype}")
    return case


def rotary_23(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    head_size, num_heads, rotary_dim = _head_geometry(rng)
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 17))
    four_d = rng.random() < 0.5
    shape = [batch, num_heads, seq, head_size] if four_d else [batch, seq, num_heads * head_size]
    case = Case("RotaryEmbedding", dtype, domain="", opset=23)
    case.add_input("X", uniform(rng, shape, fdt))
    with_ids = rng.random() < 0.6
    if with_ids:
        max_pos = seq + int(rng.integers(0, 48))
        cos, sin = rope_tables(rng, np.arange(max_pos), rotary_dim, fdt)
        ids = rng.integers(0, max_pos, size=(batch, seq), dtype=np.int64)
    else:
        starts = rng.integers(0, 40, size=(batch, 1))
        cos, sin = rope_tables(rng, starts + np.arange(seq), rotary_dim, fdt)
    case.add_initializer("cos_cache", cos) if with_ids else case.add_input("cos_cache", cos)
    case.add_initializer("sin_cache", sin) if with_ids else case.add_input("sin_cache", sin)
    if with_ids:
        case.add_input("position_ids", ids)
    case.add_output("Y", fdt)
    interleaved = int(rng.integers(0, 2))
    case.attrs = {"interleaved": interleaved}
    if not four_d:
        case.attrs["num_heads"] = num_heads
    if rotary_dim != head_size:
        case.attrs["rotary_embedding_dim"] = rotary_dim
    case.describe = (f"X={shape} heads={num_heads}x{head_size} rotary_dim={rotary_dim} "
                     f"caches={'by position_ids' if with_ids else 'per token'} interleaved={interleaved} {dtype}")
    return case


GENERATORS = {"RotaryEmbedding": contrib_rotary, "RotaryEmbedding23": rotary_23}
