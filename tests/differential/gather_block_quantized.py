"""com.microsoft GatherBlockQuantized: an embedding table quantised in blocks along its last axis,
gathered along axis 0. Data int4 / uint4 (packed ONNX types) or uint8 holding 4-bit pairs or
8-bit codes (the model builder's tied-embedding layout); zero points absent or present; block
sizes 16..256; int32/int64 indices of rank 1..3, negative ones included.
"""
import numpy as np

from case_util import Case, float_type, int4_tensor, uniform


def _data_and_zero_points(rng, case, kind, rows, k, blocks):
    """Adds data (+ scales added by the caller) and returns the zero-point initializer or None."""
    if kind in ("int4", "uint4"):
        signed = kind == "int4"
        low, high = (-8, 8) if signed else (0, 16)
        case.add_initializer("data", int4_tensor("data", rng.integers(low, high, size=(rows, k)), signed))
        return int4_tensor("zero_points", rng.integers(low, high, size=(rows, blocks)), signed)
    bits = 4 if kind == "uint8_4bit" else 8
    per_byte = 8 // bits
    case.add_initializer("data", rng.integers(0, 256, size=(rows, k // per_byte), dtype=np.uint8))
    return rng.integers(0, 256, size=(rows, (blocks + per_byte - 1) // per_byte), dtype=np.uint8)


def generate(rng):
    dtype = rng.choice(["f32", "f16"])
    fdt = float_type(dtype)
    kind = str(rng.choice(["int4", "uint4", "uint8_4bit", "uint8_8bit"], p=[0.35, 0.15, 0.35, 0.15]))
    block = int(rng.choice([16, 32, 64, 128, 256]))
    rows = int(rng.integers(1, 301))
    k = int(rng.integers(1, 40)) * 16 + int(rng.choice([0, 0, int(rng.integers(1, 16)) * 2]))
    blocks = (k + block - 1) // block
    case = Case("GatherBlockQuantized", dtype)
    zero_points = _data_and_zero_points(rng, case, kind, rows, k, blocks)
    index_type = np.int64 if rng.random() < 0.5 else np.int32
    index_shape = [int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 4)))]
    case.add_input("indices", rng.integers(-rows, rows, size=index_shape).astype(index_type))
    case.add_initializer("scales", uniform(rng, (rows, blocks), fdt, -0.1, 0.1))
    with_zp = rng.random() < 0.6
    if with_zp:
        case.add_initializer("zero_points", zero_points)
    case.add_output("output", fdt)
    case.attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": block}
    if kind.startswith("uint8"):
        case.attrs["bits"] = 4 if kind == "uint8_4bit" else 8
    case.describe = (f"data={kind} [{rows}, {k}] block={block} zero_points={int(with_zp)} "
                     f"indices={np.dtype(index_type).name}{index_shape} {dtype}")
    return case


GENERATORS = {"GatherBlockQuantized": generate}
