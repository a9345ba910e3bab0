"""RMS and layer norms: SimplifiedLayerNormalization (ONNX Runtime registers it in the ai.onnx
domain, as exporters write it), RMSNormalization (opset 23), LayerNormalization (opset 17, with
or without bias B), and the com.microsoft
SkipSimplifiedLayerNormalization / SkipLayerNormalization with every optional input and output
(the simplified op's mean output is defined as zeros by ORT). The scale (and LayerNormalization's
bias) of the unfused norms also varies across rows in some cases: any shape that broadcasts to X,
as ONNX Runtime 1.30 computes it.
Inputs have a random scale (1e-2..10) and offset so the statistics matter.
"""
import numpy as np

from case_util import Case, float_type, normal, uniform


def _hidden(rng):
    return int(rng.choice([int(rng.integers(1, 129)), int(rng.integers(129, 1100)), 2048, 3072, 4096]))


def _activations(rng, shape, fdt):
    scale = 10.0 ** rng.uniform(-2, 1)
    offset = rng.uniform(-1, 1) * scale
    return (rng.standard_normal(size=shape) * scale + offset).astype(fdt)


def _leading_shape(rng, hidden, max_rank):
    """Leading dims of X so that X has rank 2..max_rank and at most ~48k elements."""
    rank = int(rng.integers(2, max_rank + 1))
    budget = max(1, 48 * 1024 // hidden)
    dims = []
    for _ in range(rank - 1):
        dims.append(int(rng.integers(1, max(2, min(budget, 9) + 1))))
        budget = max(1, budget // dims[-1])
    return dims


def _repeats_per_row(param, x, axis):
    """The scale repeats over X's normalised shape (leading ones dropped, a suffix of it)."""
    kept = list(param)
    while kept and kept[0] == 1:
        kept.pop(0)
    return len(kept) <= len(x) - axis and kept == x[len(x) - len(kept):]


def _per_row_scale_shape(rng, x, axis):
    """A scale shape broadcasting to X that varies across rows, or None where the draw repeats."""
    dims = [d if rng.random() < 0.5 else 1 for d in x]
    if rng.random() < 0.3:
        dims = dims[int(rng.integers(0, len(dims))):]
    return None if _repeats_per_row(dims, x, axis) else dims


def _norm(rng, op, domain, opset, stats):
    """The unfused norms; `stats`: the optional statistics outputs after Y, each drawn in turn."""
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    hidden = _hidden(rng)
    lead = _leading_shape(rng, hidden, 4)
    shape = lead + [hidden]
    # Normalise over the last axis, or over the last two when the shape allows.
    axis = len(shape) - 1
    if len(shape) >= 3 and shape[-1] * shape[-2] <= 8192 and rng.random() < 0.25:
        axis = len(shape) - 2
    negative = rng.random() < 0.5
    case = Case(op, dtype, domain=domain, opset=opset)
    case.add_input("X", _activations(rng, shape, fdt))
    scale_shape = shape[axis:]
    if opset >= 23 and rng.random() < 0.2 and len(scale_shape) > 1:
        scale_shape = [1] + scale_shape[1:]  # broadcast along the leading normalised axis
    case.add_initializer("scale", normal(rng, scale_shape, fdt))
    case.add_output("Y", fdt)
    wanted = [name for name in stats if rng.random() < 0.5]
    for name in stats[:len(stats) if not wanted else stats.index(wanted[-1]) + 1]:
        case.add_output(name if name in wanted else "", np.float32)
    epsilon = float(rng.choice([1e-5, 1e-6, 1e-3]))
    case.attrs = {"axis": axis - len(shape) if negative else axis, "epsilon": epsilon, "stash_type": 1}
    # Drawn last so the other parameters of a case stay as they were before this option existed.
    per_row = _per_row_scale_shape(rng, shape, axis) if rng.random() < 0.35 else None
    if per_row is not None:
        scale_shape = per_row
        case.replace_initializer("scale", normal(rng, scale_shape, fdt))
    bias = ""
    if op == "LayerNormalization" and rng.random() < 0.7:
        bias_shape = (_per_row_scale_shape(rng, shape, axis) if rng.random() < 0.35 else None) or shape[axis:]
        case.add_initializer("B", uniform(rng, bias_shape, fdt))
        bias = f" B={bias_shape}"
    case.describe = (f"X={shape} axis={case.attrs['axis']} scale={scale_shape}{bias} eps={epsilon:g} "
                     f"outputs={len([o for o, _ in case.outputs if o])} {dtype}")
    return case


def simplified_layer_norm(rng):
    return _norm(rng, "SimplifiedLayerNormalization", "", 21, stats=("inv_std_var",))


def rms_norm_23(rng):
    return _norm(rng, "RMSNormalization", "", 23, stats=())


def layer_norm(rng):
    return _norm(rng, "LayerNormalization", "", 17, stats=("Mean", "InvStdDev"))


def _skip_norm(rng, op, centred):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    hidden = _hidden(rng)
    lead = _leading_shape(rng, hidden, 3)
    shape = lead + [hidden]
    case = Case(op, dtype)
    case.add_input("input", _activations(rng, shape, fdt))
    skip_shape = shape
    if len(shape) == 3 and rng.random() < 0.3:
        skip_shape = [1] + shape[1:] if rng.random() < 0.5 else shape[1:]  # broadcast over the batch
    case.add_input("skip", _activations(rng, skip_shape, fdt))
    case.add_initializer("gamma", normal(rng, [hidden], fdt))
    optional = []
    if centred:
        if rng.random() < 0.7:
            case.add_initializer("beta", normal(rng, [hidden], fdt))
            optional.append("beta")
        else:
            case.skip_input()
    if rng.random() < 0.5:
        case.add_initializer("bias", uniform(rng, [hidden], fdt))
        optional.append("bias")
    # Output 0 always; mean (1), inv_std_var (2) and input_skip_bias_sum (3) each maybe.
    case.add_output("output", fdt)
    names = {1: ("mean", np.float32), 2: ("inv_std_var", np.float32), 3: ("input_skip_bias_sum", fdt)}
    wanted = [i for i in (1, 2, 3) if rng.random() < 0.5]
    for i in (1, 2, 3):
        case.add_output(*names[i]) if i in wanted else case.add_output("", fdt)
    epsilon = float(rng.choice([1e-5, 1e-6, 1e-12]))
    case.attrs = {"epsilon": epsilon}
    case.describe = (f"input={shape} skip={skip_shape} {'+'.join(optional) or 'no bias'} "
                     f"outputs=0{''.join(str(i) for i in wanted)} eps={epsilon:g} {dtype}")
    return case


def skip_simplified_layer_norm(rng):
    return _skip_norm(rng, "SkipSimplifiedLayerNormalization", centred=False)


def skip_layer_norm(rng):
    return _skip_norm(rng, "SkipLayerNormalization", centred=True)


GENERATORS = {
    "SimplifiedLayerNormalization": simplified_layer_norm,
    "RMSNormalization23": rms_norm_23,
    "LayerNormalization": layer_norm,
    "SkipSimplifiedLayerNormalization": skip_simplified_layer_norm,
    "SkipLayerNormalization": skip_layer_norm,
}
