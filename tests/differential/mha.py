"""com.microsoft MultiHeadAttention in the layouts encoder/decoder exports use:

  self      key/value (B, L=S, hidden), optional past_key/past_value (B, N, P, H) and presents
  cross     key/value (B, L, hidden) of another length
  cross-4d  key/value already in (B, N, L, H), as a decoder's cached cross-attention passes them

with optional projection bias, key_padding_mask (B,) lengths / (B, T) / (B, S, T), attention_bias
broadcast over batch and/or heads, unidirectional, custom scale and mask_filter_value, value head
sizes differing from the query's.
"""
import numpy as np

from case_util import Case, float_type, normal, uniform


def _key_padding_mask(rng, batch, s, total):
    kind = str(rng.choice(["lengths", "2d", "3d"]))
    if kind == "lengths":
        return rng.integers(1, total + 1, size=batch).astype(np.int32), kind
    shape = (batch, total) if kind == "2d" else (batch, s, total)
    mask = (rng.random(shape) < 0.75).astype(np.int32)
    mask[..., 0] = 1  # no fully masked row
    return mask, kind


def generate(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    layout = str(rng.choice(["self", "cross", "cross-4d"], p=[0.5, 0.3, 0.2]))
    batch, heads = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    head_size = int(rng.choice([8, 16, 32, 64, 80, 128]))
    v_head_size = head_size if layout != "cross" or rng.random() < 0.7 else int(rng.choice([8, 32, 64]))
    s = int(rng.integers(1, 13))
    kv_len = s if layout == "self" else int(rng.integers(1, 17))
    past = int(rng.integers(1, 20)) if layout == "self" and rng.random() < 0.5 else 0
    total = past + kv_len
    hidden, v_hidden = heads * head_size, heads * v_head_size
    amplitude = float(rng.choice([0.5, 1.0, 2.0]))

    case = Case("MultiHeadAttention", dtype)
    case.add_input("query", normal(rng, (batch, s, hidden), fdt, amplitude))
    if layout == "cross-4d":
        case.add_input("key", normal(rng, (batch, heads, kv_len, head_size), fdt, amplitude))
        case.add_input("value", normal(rng, (batch, heads, kv_len, v_head_size), fdt))
    else:
        case.add_input("key", normal(rng, (batch, kv_len, hidden), fdt, amplitude))
        case.add_input("value", normal(rng, (batch, kv_len, v_hidden), fdt))
    notes = []
    if layout != "cross-4d" and rng.random() < 0.5:
        case.add_initializer("bias", uniform(rng, (2 * hidden + v_hidden,), fdt, -0.5, 0.5))
        notes.append("bias")
    else:
        case.skip_input()
    if rng.random() < 0.4:
        mask, kind = _key_padding_mask(rng, batch, s, total)
        case.add_input("key_padding_mask", mask)
        notes.append(f"key_padding_mask={kind}")
    else:
        case.skip_input()
    if rng.random() < 0.4:
        shape = (int(rng.choice([1, batch])), int(rng.choice([1, heads])), s, total)
        case.add_input("attention_bias", uniform(rng, shape, fdt, -2, 2))
        notes.append(f"attention_bias={list(shape)}")
    else:
        case.skip_input()
    case.add_output("output", fdt)
    if past:
        case.add_input("past_key", normal(rng, (batch, heads, past, head_size), fdt, amplitude))
        case.add_input("past_value", normal(rng, (batch, heads, past, v_head_size), fdt))
        case.add_output("present_key", fdt)
        case.add_output("present_value", fdt)
    attrs = {"num_heads": heads}
    if layout == "self" and rng.random() < 0.4:
        attrs["unidirectional"] = 1
        notes.append("unidirectional")
    if rng.random() < 0.2:
        attrs["scale"] = float(rng.uniform(0.05, 0.5))
        notes.append(f"scale={attrs['scale']:.3g}")
    if rng.random() < 0.2:
        attrs["mask_filter_value"] = float(rng.choice([-1e4, -1e9, -50.0]))
        notes.append(f"mask_filter_value={attrs['mask_filter_value']:g}")
    case.attrs = attrs
    case.describe = (f"{layout} batch={batch} S={s} L={kv_len} past={past} heads={heads}x{head_size}/v{v_head_size} "
                     f"{' '.join(notes)} {dtype}")
    return case


GENERATORS = {"MultiHeadAttention": generate}
