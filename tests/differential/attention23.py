"""ONNX opset-23 Attention: 4D (B, heads, S, H) or 3D (B, S, heads * H) inputs, grouped KV heads,
value head size different from the query's, past_key/past_value with presents, bool or additive
float attn_mask broadcast from (S, T) up to (B, heads, S, T), is_causal, scale, softcap, and the
qk_matmul_output of every mode. Column 0 of a mask is always open so no row is fully masked
(whose softmax the spec leaves undefined).

is_causal comes only with as many new keys as queries (self-attention, what LLM exports do):
with other key counts ORT 1.30 aligns the causal diagonal neither to the past length (as the
ONNX reference does) nor consistently to the end.
"""
import numpy as np

from case_util import Case, float_type, normal


def _mask(rng, batch, heads, s, total, fdt):
    shape = [(s, total), (1, 1, s, total), (batch, 1, s, total), (1, heads, s, total), (batch, heads, s, total)]
    shape = shape[int(rng.integers(0, len(shape)))]
    if rng.random() < 0.5:
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True
        return mask, f"bool{list(shape)}"
    mask = rng.uniform(-3, 1, size=shape)
    mask[rng.random(shape) < 0.2] = -np.inf if rng.random() < 0.5 else -1e4
    mask[..., 0] = 0.0
    return mask.astype(fdt), f"float{list(shape)}"


def generate(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    batch = int(rng.integers(1, 4))
    kv_heads = int(rng.choice([1, 2, 3]))
    heads = kv_heads * int(rng.choice([1, 2, 4]))
    head_size = int(rng.choice([8, 16, 32, 64, 80, 128]))
    v_head_size = head_size if rng.random() < 0.8 else int(rng.choice([16, 64]))
    s = int(rng.integers(1, 13))
    causal = rng.random() < 0.4
    kv_len = s if causal or rng.random() < 0.6 else int(rng.integers(1, 13))
    past = int(rng.integers(1, 20)) if rng.random() < 0.4 else 0
    total = past + kv_len
    three_d = rng.random() < 0.3
    amplitude = float(rng.choice([0.5, 1.0, 2.0]))

    def activations(heads_, length, size, amp):
        if three_d:
            return normal(rng, (batch, length, heads_ * size), fdt, amp)
        return normal(rng, (batch, heads_, length, size), fdt, amp)

    case = Case("Attention", dtype, domain="", opset=23)
    case.add_input("Q", activations(heads, s, head_size, amplitude))
    case.add_input("K", activations(kv_heads, kv_len, head_size, amplitude))
    case.add_input("V", activations(kv_heads, kv_len, v_head_size, 1.0))
    notes = []
    if rng.random() < 0.5:
        mask, kind = _mask(rng, batch, heads, s, total, fdt)
        case.add_input("attn_mask", mask)
        notes.append(f"mask={kind}")
    else:
        case.skip_input()
    case.add_output("Y", fdt)
    if past:
        case.add_input("past_key", normal(rng, (batch, kv_heads, past, head_size), fdt, amplitude))
        case.add_input("past_value", normal(rng, (batch, kv_heads, past, v_head_size), fdt))
        case.add_output("present_key", fdt)
        case.add_output("present_value", fdt)
    attrs = {}
    if three_d:
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    if causal:
        attrs["is_causal"] = 1
        notes.append("causal")
    if rng.random() < 0.2:
        attrs["scale"] = float(rng.uniform(0.05, 0.5))
        notes.append(f"scale={attrs['scale']:.3g}")
    if rng.random() < 0.25:
        attrs["softcap"] = float(rng.choice([2.0, 5.0, 30.0]))
        notes.append(f"softcap={attrs['softcap']:g}")
    if rng.random() < 0.25:
        if not past:
            case.add_output("", fdt)
            case.add_output("", fdt)
        case.add_output("qk_matmul_output", fdt)
        attrs["qk_matmul_output_mode"] = int(rng.integers(0, 4))
        notes.append(f"qk_output_mode={attrs['qk_matmul_output_mode']}")
    case.attrs = attrs
    case.describe = (f"{'3D' if three_d else '4D'} batch={batch} S={s} L={kv_len} past={past} "
                     f"heads={heads}/{kv_heads}x{head_size}/v{v_head_size} {' '.join(notes)} {dtype}")
    return case


GENERATORS = {"Attention23": generate}
