"""com.microsoft GELU variants: FastGelu (tanh approximation, optional bias), QuickGelu
(x * sigmoid(alpha * x)) and BiasGelu (exact erf GELU of A + B). Inputs span |x| up to 12 so
the saturated tails are covered as well as the curved middle.
"""
from case_util import Case, float_type, uniform


def _shape(rng):
    rank = int(rng.integers(1, 5))
    hidden = int(rng.choice([int(rng.integers(1, 70)), int(rng.integers(70, 3000))]))
    shape = [int(rng.integers(1, 6)) for _ in range(rank - 1)] + [hidden]
    return shape


def _x(rng, shape, fdt):
    bound = float(rng.choice([1.0, 4.0, 12.0]))
    return uniform(rng, shape, fdt, -bound, bound), bound


def fast_gelu(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    shape = _shape(rng)
    case = Case("FastGelu", dtype)
    x, bound = _x(rng, shape, fdt)
    case.add_input("X", x)
    bias = rng.random() < 0.5
    if bias:
        case.add_initializer("bias", uniform(rng, shape[-1:], fdt))
    case.add_output("Y", fdt)
    case.describe = f"X={shape} |x|<={bound:g} bias={int(bias)} {dtype}"
    return case


def quick_gelu(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    shape = _shape(rng)
    case = Case("QuickGelu", dtype)
    x, bound = _x(rng, shape, fdt)
    case.add_input("X", x)
    case.add_output("Y", fdt)
    alpha = None if rng.random() < 0.3 else float(rng.choice([1.702, 1.0, float(rng.uniform(0.1, 3.0))]))
    if alpha is not None:
        case.attrs = {"alpha": alpha}
    case.describe = f"X={shape} |x|<={bound:g} alpha={'default' if alpha is None else f'{alpha:g}'} {dtype}"
    return case


def bias_gelu(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    shape = _shape(rng)
    case = Case("BiasGelu", dtype)
    x, bound = _x(rng, shape, fdt)
    case.add_input("A", x)
    case.add_initializer("B", uniform(rng, shape[-1:], fdt))
    case.add_output("C", fdt)
    case.describe = f"A={shape} |a|<={bound:g} {dtype}"
    return case


GENERATORS = {"FastGelu": fast_gelu, "QuickGelu": quick_gelu, "BiasGelu": bias_gelu}
