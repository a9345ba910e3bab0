"""com.microsoft GroupQueryAttention as LLM exports use it, in three phases:

  prompt    batch 1..3, right-padded: sequence b holds seqlens_k[b] + 1 <= S tokens, no past
  decode    one new token per sequence, batch 1..3 with different past lengths
  chunk     a later prompt chunk on top of a past (ORT documents it for batch 1 only)

KV buffers are separate (past holds max past length, present one step longer) or shared
(past and present sized to a maximum length, as onnxruntime-genai binds them). Also: rotary
(half or interleaved, caches from a real table), packed QKV, local_window_size, softcap, custom
scale, attention_bias, head_sink (gpt-oss), head sizes 64/80/96/128/256 with fewer heads for the
big ones, GQA group sizes 1..4, seqlens_k as [batch], [batch, 1] or [1, batch].

Only what ORT defines is compared: present rows t > seqlens_k[b] and output rows of padding
tokens are masked out.
"""
import numpy as np

from case_util import Case, float_type, normal
from rotary import rope_tables


# seqlens_k as exporters write it: [batch], and [batch, 1] from older onnxruntime-genai builders
# (ReduceSum with keepdims=1); ORT also reads [1, batch] as the same values.
_SEQLENS_SHAPES = [lambda b: (b,), lambda b: (b, 1), lambda b: (1, b)]


def _geometry(rng):
    head_size = int(rng.choice([64, 80, 96, 128, 256]))
    kv_heads = int(rng.choice([1, 2])) if head_size <= 128 else 1
    group = int(rng.choice([1, 2, 4]))
    return head_size, kv_heads * group, kv_heads


def _lengths(rng, phase, batch):
    """(S, per-sequence total lengths) for the phase."""
    if phase == "prompt":
        s = int(rng.integers(1, 17))
        totals = rng.integers(1, s + 1, size=batch)
        totals[rng.integers(0, batch)] = s  # the longest sequence fills the batch
        return s, totals
    if phase == "decode":
        return 1, rng.integers(1, 40, size=batch) + 1
    s = int(rng.integers(2, 9))
    return s, np.array([s + int(rng.integers(1, 25))])


def generate(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    head_size, heads, kv_heads = _geometry(rng)
    phase = str(rng.choice(["prompt", "decode", "chunk"], p=[0.35, 0.45, 0.2]))
    batch = 1 if phase == "chunk" else int(rng.integers(1, 4))
    s, totals = _lengths(rng, phase, batch)
    total = int(totals.max())
    shared = rng.random() < 0.5
    max_len = total + int(rng.integers(0, 16)) if shared else total
    packed = rng.random() < 0.25
    amplitude = float(rng.choice([0.5, 1.0, 2.0]))

    case = Case("GroupQueryAttention", dtype)
    q_width, kv_width = heads * head_size, kv_heads * head_size
    if packed:
        case.add_input("query", normal(rng, (batch, s, q_width + 2 * kv_width), fdt, amplitude))
        case.skip_input()
        case.skip_input()
    else:
        case.add_input("query", normal(rng, (batch, s, q_width), fdt, amplitude))
        case.add_input("key", normal(rng, (batch, s, kv_width), fdt, amplitude))
        case.add_input("value", normal(rng, (batch, s, kv_width), fdt))
    past_len = max_len if shared else total - s
    if phase != "prompt" or shared:
        # Rows past a sequence's own past length hold leftovers a correct kernel never reads.
        case.add_input("past_key", normal(rng, (batch, kv_heads, past_len, head_size), fdt, amplitude))
        case.add_input("past_value", normal(rng, (batch, kv_heads, past_len, head_size), fdt))
    else:
        case.skip_input()
        case.skip_input()
    case.add_input("seqlens_k", (totals - 1).astype(np.int32))
    case.add_input("total_sequence_length", np.array(total, dtype=np.int32))

    attrs = {"num_heads": heads, "kv_num_heads": kv_heads}
    notes = []
    if rng.random() < 0.5:
        interleaved = int(rng.integers(0, 2))
        cos, sin = rope_tables(rng, np.arange(max_len + int(rng.integers(0, 8))), head_size, fdt)
        case.add_input("cos_cache", cos)
        case.add_input("sin_cache", sin)
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
        notes.append(f"rotary{' interleaved' if interleaved else ''}")
    else:
        case.skip_input()
        case.skip_input()
    case.skip_input()  # position_ids
    if rng.random() < 0.2:
        shape = (int(rng.choice([1, batch])), int(rng.choice([1, heads])), s, total)
        case.add_input("attention_bias", normal(rng, shape, fdt))
        notes.append(f"attention_bias={list(shape)}")
    else:
        case.skip_input()
    if rng.random() < 0.15:
        case.add_input("head_sink", normal(rng, (heads,), fdt))
        notes.append("head_sink")
    if rng.random() < 0.3:
        attrs["local_window_size"] = int(rng.integers(1, total + 1))
        notes.append(f"window={attrs['local_window_size']}")
    if rng.random() < 0.3:
        attrs["softcap"] = float(rng.choice([2.0, 5.0, 30.0]))
        notes.append(f"softcap={attrs['softcap']:g}")
    if rng.random() < 0.2:
        attrs["scale"] = float(rng.uniform(0.02, 0.3))
        notes.append(f"scale={attrs['scale']:.3g}")
    case.attrs = attrs

    present_len = max(past_len, total)
    case.add_output("output", fdt)
    case.add_output("present_key", fdt)
    case.add_output("present_value", fdt)
    rows = np.arange(present_len)[None, :] < totals[:, None]  # [batch, present_len]
    present_mask = np.broadcast_to(rows[:, None, :, None], (batch, kv_heads, present_len, head_size))
    case.masks[1] = present_mask
    case.masks[2] = present_mask
    if phase == "prompt":
        tokens = np.arange(s)[None, :] < totals[:, None]  # [batch, s]: padding rows unspecified
        case.masks[0] = np.broadcast_to(tokens[:, :, None], (batch, s, q_width))
    # Drawn last so the other parameters of a case stay as they were before this option existed.
    seqlens_shape = _SEQLENS_SHAPES[int(rng.choice(len(_SEQLENS_SHAPES), p=[0.7, 0.2, 0.1]))](batch)
    if len(seqlens_shape) > 1:
        case.reshape_input("seqlens_k", seqlens_shape)
        notes.append(f"seqlens_k={list(seqlens_shape)}")
    case.describe = (f"{phase} batch={batch} S={s} totals={totals.tolist()} heads={heads}/{kv_heads}x{head_size} "
                     f"{'shared' if shared else 'separate'} kv past={past_len}{' packed' if packed else ''} "
                     f"{' '.join(notes)} {dtype}")
    return case


GENERATORS = {"GroupQueryAttention": generate}
