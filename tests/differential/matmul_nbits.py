"""com.microsoft MatMulNBits: bits 2/4/8, block 16..256, K often not a multiple of the block, zero
points none / packed uint8 / float (fractional too), bias, A of rank 2 or 3 with M 1..33,
accuracy_level 0 and 4. Weights, scales, zero points and bias are initializers, as in exported
models. ORT 1.30 rejects float zero points with 8-bit weights, so those are not generated.

With accuracy_level 4 ORT rounds A to int8 (scale max|A block| / 127, or an asymmetric uint8 with
a finer step), each element by at most max|A| / 254, while we keep A in float: those cases allow
(max|A| / 254) * max_n sum_k |W[k, n]| more, the worst-case sum of that rounding (with 2-bit
weights ORT rounds A at M = 1; we keep 2-bit products in float at every accuracy level).
"""
import numpy as np

from case_util import Case, float_type, uniform


def dequantized_weights(codes, scales, zero_points, bits, k):
    """W as [N, K] floats: (code - zero point) * scale per block, codes low bits first."""
    n, blocks, _ = codes.shape
    mask = (1 << bits) - 1
    q = np.stack([(codes >> shift) & mask for shift in range(0, 8, bits)], axis=-1)
    q = q.reshape(n, blocks, -1).astype(np.float64)
    if zero_points is None:
        zp = np.full((n, blocks), float(1 << (bits - 1)))
    elif zero_points.dtype == np.uint8:
        per_byte = 8 // bits
        shifts = (np.arange(blocks) % per_byte) * bits
        zp = ((zero_points[:, np.arange(blocks) // per_byte] >> shifts) & ((1 << bits) - 1)).astype(np.float64)
    else:
        zp = zero_points.astype(np.float64).reshape(n, blocks)
    w = (q - zp[:, :, None]) * scales.astype(np.float64).reshape(n, blocks)[:, :, None]
    return w.reshape(n, -1)[:, :k]


def generate(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    bits = int(rng.choice([2, 4, 8], p=[0.2, 0.4, 0.4]))
    block = int(rng.choice([16, 32, 64, 128, 256]))
    k = int(rng.integers(8, 641))
    if rng.random() < 0.2:
        k = block * int(rng.integers(1, max(2, 640 // block + 1)))  # an exact multiple now and then
    n = int(rng.integers(1, 161))
    m = 1 if rng.random() < 0.4 else int(rng.integers(2, 34))
    zp = rng.choice(["none", "packed", "float"] if bits != 8 else ["none", "packed"])
    bias = rng.random() < 0.5
    accuracy = int(rng.choice([0, 4]))
    blocks = (k + block - 1) // block

    case = Case("MatMulNBits", dtype)
    batch = int(rng.integers(1, 4)) if m > 1 and rng.random() < 0.3 else 0
    a = uniform(rng, (batch, m, k) if batch else (m, k), fdt)
    case.add_input("A", a)
    rows = f"{batch}x{m}" if batch else f"{m}"
    codes = rng.integers(0, 256, size=(n, blocks, block * bits // 8), dtype=np.uint8)
    scales = uniform(rng, (n * blocks,), fdt, -0.05, 0.05)
    case.add_initializer("B", codes)
    case.add_initializer("scales", scales)
    zero_points = None
    if zp == "packed":
        zero_points = rng.integers(0, 256, size=(n, (blocks * bits + 7) // 8), dtype=np.uint8)
    elif zp == "float":
        levels = rng.uniform(0, (1 << bits) - 1, size=n * blocks)
        zero_points = (levels if rng.random() < 0.5 else np.round(levels)).astype(fdt)
    if zero_points is not None:
        case.add_initializer("zero_points", zero_points)
    elif bias:
        case.skip_input()
    if bias:
        case.skip_input()  # g_idx
        case.add_initializer("bias", uniform(rng, (n,), fdt))
    case.add_output("Y", fdt)
    case.attrs = {"K": k, "N": n, "bits": bits, "block_size": block, "accuracy_level": accuracy}
    if accuracy == 4:
        w = dequantized_weights(codes, scales, zero_points, bits, k)
        case.extra_abs_tolerance = float(np.abs(a).max()) / 254 * float(np.abs(w).sum(axis=1).max())
        case.group = f"{dtype} accuracy_level=4"
    elif bits == 2:
        case.group = f"{dtype} bits=2"
    case.describe = (f"M={rows} K={k} N={n} bits={bits} block={block} zp={zp} bias={int(bias)} "
                     f"accuracy_level={accuracy} {dtype}")
    return case


GENERATORS = {"MatMulNBits": generate}
