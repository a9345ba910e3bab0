"""com.microsoft MoE and QMoE (contract in src/ops/schema/moe.h): 1 to 40 routed rows (2-D or
3-D input), 1 to 32 experts, k from 1 to all of them, experts never chosen, exact ties in the
router logits, every activation, SwiGLU with and without alpha / beta / limit, biases,
normalize_routing_weights; QMoE codes of 2, 4 and 8 bits with per-row or block-wise scales (16 to
128), zero points, router_weights, and MXFP4.

ONNX Runtime 1.30's CPU kernels run interleaved SwiGLU only (swiglu_fusion 1), no fc3, and no
MXFP4 (QMoE quant_type "fp4" has a schema but no CPU kernel); and where they run, two variants
disagree with the ops' documented formulas: QMoE zero points (wrong values, or NaN, for most block
shapes: docs/moe.md), QMoE 2-bit codes in blocks of 32 (off by up to 8e-4 of the output scale, as
if it rounded the activations) and MoE float16 with normalize_routing_weights 0 (zeros or garbage). Cases
with any of these are compared with the float64 evaluation below instead (report rows marked
"float64"); its routing follows what ORT 1.30's CPU kernels were measured to do
(src/ops/schema/moe.h), and it matches ORT within 4e-7 of the output scale on the f32 variants
ORT gets right.
"""
import numpy as np
from onnx import TensorProto

from case_util import Case, float_type, uniform

ALWAYS_REFERENCE = False  # set by a check of the float64 evaluation against ORT's variants
FLOAT8E8M0 = 24  # ONNX element type onnx 1.12's Python enum lacks
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def activation(name, v):
    if name == "relu":
        return np.maximum(v, 0)
    if name == "gelu":  # ONNX Runtime's tanh approximation
        return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))
    if name == "silu":
        return v * sigmoid(v)
    return v


SPARSE_MIXER_EPS = 0.01  # ONNX Runtime's fixed jitter_eps; Phi-3.5-MoE's router_jitter_noise


def sparse_mixer(row):
    """PhiMoE's sparsemixer at inference, as Hugging Face's modeling_phimoe writes it: the top
    logit (first index on ties, as torch.max), weighted by its softmax over the logits whose
    distance below it, relative to max(|logit|, top), is at most 2 eps; then the same with the
    first pick masked out."""
    chosen, weights = [], []
    scores = row.copy()
    for _ in range(2):
        top = scores.max()
        pick = int(np.argmax(scores))
        factor = np.maximum(np.abs(row), top)
        with np.errstate(divide="ignore", invalid="ignore"):
            masked = (top - row) / factor > 2 * SPARSE_MIXER_EPS
        gates = np.where(masked | np.isneginf(scores), -np.inf, scores)
        gates = np.exp(gates - top)
        chosen.append(pick)
        weights.append(gates[pick] / gates.sum())
        scores = scores.copy()
        scores[pick] = -np.inf
    return list(zip(chosen, weights))


def route(logits, k, quantized, normalize, router_weights, sparse=False):
    """Per token: [(expert, weight)] for the k largest logits, ties to the higher index."""
    logits = logits.astype(np.float64)
    if sparse:
        return [sparse_mixer(row) for row in logits]
    routes = []
    for t, row in enumerate(logits):
        chosen = sorted(range(len(row)), key=lambda e: (-row[e], -e))[:k]
        if router_weights is not None:
            weights = router_weights[t, chosen].astype(np.float64)
            if normalize:
                weights /= weights.sum()
        elif quantized:
            weights = np.exp(row[chosen] - row[chosen[0]])
            weights /= weights.sum()
        else:
            p = np.exp(row - row.max())
            weights = p[chosen] / p.sum()
            if normalize:
                weights /= weights.sum()
        routes.append(list(zip(chosen, weights)))
    return routes


def reference(x, routes, w, b, spec):
    """y [tokens, hidden] in float64; w / b: per projection [E, N, K] / [E, N] or None."""
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = np.zeros(flat.shape)
    inter = spec["inter"]
    for t, chosen in enumerate(routes):
        for e, weight in chosen:
            proj = [None if w[i] is None else w[i][e] @ flat[t] + (b[i][e] if b[i] is not None else 0) for i in (0, 2)]
            if spec["activation"] == "swiglu":
                fusion = spec["fusion"]
                g, lin = {0: (proj[0], proj[1]), 1: (proj[0][0::2], proj[0][1::2]), 2: (proj[0][:inter], proj[0][inter:])}[fusion]
                g = np.minimum(g, spec["limit"])
                lin = np.clip(lin, -spec["limit"], spec["limit"])
                h = g * sigmoid(spec["alpha"] * g) * (lin + spec["beta"])
            else:
                h = activation(spec["activation"], proj[0]) * (proj[1] if proj[1] is not None else 1)
            out[t] += weight * (w[1][e] @ h + (b[1][e] if b[1] is not None else 0))
    return out.reshape(x.shape)


def router_logits(rng, tokens, experts, fdt):
    logits = rng.uniform(-3, 3, size=(tokens, experts))
    if rng.random() < 0.25:
        logits = np.round(logits * 2) / 2  # exact ties
    if experts > 2 and rng.random() < 0.3:
        logits[:, rng.integers(0, experts)] = -30  # an expert never chosen
    return logits.astype(fdt)


def common(rng, quantized):
    """Shapes, attributes and routing choices shared by MoE and QMoE cases."""
    s = {"dtype": str(rng.choice(["f32", "f16"]))}
    s["tokens"] = 1 if rng.random() < 0.3 else int(rng.integers(2, 41))
    s["experts"] = int(rng.choice([1, 2, 4, 8, 16, 32], p=[0.05, 0.15, 0.3, 0.25, 0.15, 0.1]))
    s["k"] = s["experts"] if rng.random() < 0.1 else int(rng.integers(1, min(s["experts"], 4) + 1))
    s["activation"] = str(rng.choice(["relu", "gelu", "silu", "identity", "swiglu"], p=[0.15, 0.15, 0.15, 0.1, 0.45]))
    s["fusion"] = 1
    s["fc3"] = False
    if s["activation"] == "swiglu":
        s["fusion"] = int(rng.choice([0, 1, 2], p=[0.2, 0.6, 0.2]))
        s["fc3"] = s["fusion"] == 0
    elif rng.random() < 0.2:
        s["fc3"] = True  # Mixtral-style gating: act(fc1) * fc3
    custom = rng.random() < 0.6
    s["alpha"], s["beta"], s["limit"] = (1.702, 1.0, float(rng.choice([7.0, 1.0]))) if custom else (1.0, 0.0, np.inf)
    s["custom_swiglu"] = custom
    s["normalize"] = int(rng.integers(0, 2))
    s["biases"] = [rng.random() < 0.5 for _ in range(3)]
    s["router_weights"] = quantized and rng.random() < 0.15
    return s


def finish(case, rng, s, x, w, b):
    """Router inputs, attributes, output and (for variants ORT lacks) the float64 expectation."""
    fdt = float_type(s["dtype"])
    logits = router_logits(rng, s["tokens"], s["experts"], fdt)
    # Drawn last, so the other cases keep the data they had before the sparse mixer was added.
    sparse = s["experts"] >= 2 and not s["router_weights"] and rng.random() < 0.2
    if sparse:
        s["k"] = 2
        case.attrs["use_sparse_mixer"] = 1
    case.inputs.insert(1, ("router_probs", logits))
    case.node_inputs.insert(1, "router_probs")
    case.attrs.update(k=s["k"], activation_type=s["activation"], normalize_routing_weights=s["normalize"])
    if s["activation"] == "swiglu":
        case.attrs["swiglu_fusion"] = s["fusion"]
        if s["custom_swiglu"]:
            case.attrs.update(activation_alpha=s["alpha"], activation_beta=s["beta"], swiglu_limit=s["limit"])
    case.add_output("Y", fdt)
    variant = []
    if s["activation"] == "swiglu" and s["fusion"] != 1:
        variant.append(f"swiglu_fusion={s['fusion']}")
    elif s["fc3"]:
        variant.append("fc3 gating")
    if s.get("zero_points"):
        variant.append("zero points")
    if s.get("block") and s["inter"] > s["hidden"]:
        variant.append("block-wise inter > hidden")  # ORT sizes fc2's scales from hidden: rejects them
    if s.get("bits") == 2 and s.get("block") == 32:
        variant.append("2-bit block 32")
    if case.op == "MoE" and s["dtype"] == "f16" and not s["normalize"]:
        variant.append("normalize_routing_weights=0")
    if s.get("quant") == "fp4":
        variant.append("mxfp4")
    if sparse:
        variant.append("sparse mixer")  # ORT 1.30's CPU kernels ignore use_sparse_mixer
    if variant or ALWAYS_REFERENCE:
        rw = dict(case.inputs).get("router_weights")
        routes = route(logits, s["k"], case.op == "QMoE", s["normalize"], rw, sparse)
        case.expected = [reference(x, routes, w, b, s).astype(fdt)]
        case.group = f"{s['dtype']} {variant[-1]} (float64)" if variant else case.group
    case.describe = (f"T={s['tokens']}{'x3d' if x.ndim == 3 else ''} E={s['experts']} k={s['k']} hidden={s['hidden']} "
                     f"inter={s['inter']} {s['activation']}"
                     + (f" fusion={s['fusion']}" if s["activation"] == "swiglu" else "")
                     + (" fc3" if s["fc3"] else "") + (" sparse_mixer" if sparse else "") + f" norm={s['normalize']} biases={''.join(str(int(v)) for v in s['biases'])}"
                     + s.get("quant_describe", "") + f" {s['dtype']}")
    return case


def input_tensor(rng, s, fdt):
    x = uniform(rng, (s["tokens"], s["hidden"]), fdt)
    if s["tokens"] % 2 == 0 and rng.random() < 0.3:
        x = x.reshape(2, s["tokens"] // 2, s["hidden"])
    return x


def projection_shapes(s):
    """(N, K) of fc1, fc2, fc3 per expert."""
    fused = s["activation"] == "swiglu" and s["fusion"] != 0
    return [((2 if fused else 1) * s["inter"], s["hidden"]), (s["hidden"], s["inter"]), (s["inter"], s["hidden"])]


def generate_moe(rng):
    s = common(rng, quantized=False)
    fdt = float_type(s["dtype"])
    s["hidden"], s["inter"] = int(rng.integers(4, 97)), int(rng.integers(2, 65))
    case = Case("MoE", s["dtype"])
    x = input_tensor(rng, s, fdt)
    case.add_input("input", x)
    w, b = [None] * 3, [None] * 3
    for i, (n, k) in enumerate(projection_shapes(s)):
        if i == 2 and not s["fc3"]:
            break
        w[i] = uniform(rng, (s["experts"], n, k), fdt, -1 / np.sqrt(k), 1 / np.sqrt(k))
        case.add_initializer(f"fc{i + 1}_experts_weights", w[i])
        if s["biases"][i]:
            b[i] = uniform(rng, (s["experts"], n), fdt)
            case.add_initializer(f"fc{i + 1}_experts_bias", b[i])
        elif i < 2 or s["fc3"]:
            case.skip_input()
    while case.node_inputs and case.node_inputs[-1] == "":
        case.node_inputs.pop()
    w = [None if v is None else v.astype(np.float64) for v in w]
    b = [None if v is None else v.astype(np.float64) for v in b]
    return finish(case, rng, s, x, w, b)


def unpack(codes, bits):
    q = np.stack([(codes >> shift) & ((1 << bits) - 1) for shift in range(0, 8, bits)], axis=-1)
    return q.reshape(*codes.shape[:-1], -1).astype(np.float64)


def int_weights(rng, s, n, k, fdt):
    """(initializers, float64 weights [E, N, K]) for QMoE int codes."""
    e, bits, block = s["experts"], s["bits"], s["block"]
    codes = rng.integers(0, 256, size=(e, n, k * bits // 8), dtype=np.uint8)
    blocks = 1 if block == 0 else k // block
    scales = uniform(rng, (e, n) if block == 0 else (e, n, blocks), fdt, -0.05, 0.05)
    q = unpack(codes, bits)
    if s["zero_points"]:
        packed = (e, (n * bits + 7) // 8) if block == 0 else (e, n, (blocks * bits + 7) // 8)
        zp_codes = rng.integers(0, 256, size=packed, dtype=np.uint8)
        zp = unpack(zp_codes, bits)[..., :n if block == 0 else blocks]
    else:
        zp_codes, zp = None, np.full(scales.shape, float(1 << (bits - 1)))
    sc = scales.astype(np.float64)
    if block == 0:
        w = (q - zp[:, :, None]) * sc[:, :, None]
    else:
        w = ((q.reshape(e, n, blocks, block) - zp[..., None]) * sc[..., None]).reshape(e, n, k)
    return codes, scales, zp_codes, w


def fp4_weights(rng, s, n, k):
    e = s["experts"]
    codes = rng.integers(0, 256, size=(e, n, k // 2), dtype=np.uint8)
    exps = rng.integers(118, 128, size=(e, n, k // 32), dtype=np.uint8)
    globals_ = rng.uniform(0.5, 2.0, size=(e,)).astype(np.float32)
    values = E2M1[np.stack([codes & 15, codes >> 4], axis=-1).reshape(e, n, k)]
    scale = 2.0 ** (exps.astype(np.float64) - 127) * globals_.astype(np.float64)[:, None, None]
    w = (values.reshape(e, n, k // 32, 32) * scale[..., None]).reshape(e, n, k)
    proto = TensorProto()
    proto.data_type = FLOAT8E8M0
    proto.dims.extend(exps.shape)
    proto.raw_data = exps.tobytes()
    return codes, proto, globals_, w


def quant_shapes(rng, s):
    if s["quant"] == "fp4":
        s["hidden"], s["inter"] = 32 * int(rng.integers(1, 5)), 32 * int(rng.integers(1, 4))
        s["quant_describe"] = " mxfp4"
        return
    s["bits"] = int(rng.choice([2, 4, 8], p=[0.2, 0.5, 0.3]))
    s["block"] = int(rng.choice([0, 16, 32, 64, 128], p=[0.3, 0.2, 0.25, 0.15, 0.1]))
    unit = s["block"] if s["block"] else 16
    s["hidden"] = unit * int(rng.integers(1, max(2, 384 // unit + 1)))
    s["inter"] = unit * int(rng.integers(1, max(2, 192 // unit + 1)))
    s["zero_points"] = rng.random() < 0.35
    s["quant_describe"] = f" bits={s['bits']} block={s['block'] or 'row'}" + (" zp" if s["zero_points"] else "")


def generate_qmoe(rng):
    s = common(rng, quantized=True)
    s["quant"] = "fp4" if rng.random() < 0.15 else "int"
    s["router_weights"] = s["router_weights"] and s["quant"] == "int"
    if s["quant"] == "fp4":  # no fc3: the schema has no fc3 global scale
        s["fc3"] = False
        s["fusion"] = 1 if s["fusion"] == 0 else s["fusion"]
    fdt = float_type(s["dtype"])
    quant_shapes(rng, s)
    case = Case("QMoE", s["dtype"])
    x = input_tensor(rng, s, fdt)
    case.add_input("input", x)
    slots = [""] * 17
    inits = {}
    w, b = [None] * 3, [None] * 3
    for i, (n, k) in enumerate(projection_shapes(s)):
        if i == 2 and not s["fc3"]:
            break
        name = f"fc{i + 1}"
        if s["quant"] == "fp4":
            codes, scales, global_scale, w[i] = fp4_weights(rng, s, n, k)
            slots[15 + i] = f"{name}_global_scale"
            inits[slots[15 + i]] = global_scale
            zp = None
        else:
            codes, scales, zp, w[i] = int_weights(rng, s, n, k, fdt)
        slots[2 + 3 * i], slots[3 + 3 * i] = f"{name}_experts_weights", f"{name}_scales"
        inits[slots[2 + 3 * i]], inits[slots[3 + 3 * i]] = codes, scales
        if zp is not None:
            slots[11 + i] = f"{name}_zero_points"
            inits[slots[11 + i]] = zp
        if s["biases"][i]:
            slots[4 + 3 * i] = f"{name}_experts_bias"
            b[i] = uniform(rng, (s["experts"], n), fdt)
            inits[slots[4 + 3 * i]] = b[i]
    if s["router_weights"]:
        slots[14] = "router_weights"
        case.inputs.append(("router_weights", rng.uniform(0, 1, size=(s["tokens"], s["experts"])).astype(fdt)))
    for name in slots[2:]:
        if name in inits:
            value = inits[name]
            if isinstance(value, TensorProto):
                value.name = name
            case.initializers.append((name, value))
    case.node_inputs.extend(slots[2:])
    while case.node_inputs[-1] == "":
        case.node_inputs.pop()
    case.attrs = {"expert_weight_bits": s.get("bits", 4)}
    if s["quant"] == "fp4":
        case.attrs["quant_type"] = "fp4"
    elif s["block"]:
        case.attrs["block_size"] = s["block"]
    b = [None if v is None else v.astype(np.float64) for v in b]
    case.group = f"{s['dtype']} {s['bits']}-bit" if s["quant"] == "int" else case.group
    return finish(case, rng, s, x, w, b)


GENERATORS = {"MoE": generate_moe, "QMoE": generate_qmoe}
