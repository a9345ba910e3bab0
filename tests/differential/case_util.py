"""What every differential-case generator shares: the Case record, random tensors, and writing a
case to disk as a single-node ONNX model plus an input folder in tests/oracle/ort_run.mjs's
manifest format.

A generator is a function `(rng) -> Case` for one op; cases.py calls it with a generator seeded
from (op, case index), so a case is the same whether generated alone or with the others.
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS_DOMAIN = "com.microsoft"

# numpy dtype -> (ONNX element type, ort_run.mjs manifest dtype name)
_TYPES = {
    np.dtype(np.float32): (TensorProto.FLOAT, "float32"),
    np.dtype(np.float16): (TensorProto.FLOAT16, "float16"),
    np.dtype(np.int64): (TensorProto.INT64, "int64"),
    np.dtype(np.int32): (TensorProto.INT32, "int32"),
    np.dtype(np.uint8): (TensorProto.UINT8, "uint8"),
    np.dtype(np.int8): (TensorProto.INT8, "int8"),
    np.dtype(np.bool_): (TensorProto.BOOL, "bool"),
}

# ONNX element types onnx 1.12's Python enum lacks; the field takes the number.
UINT4 = 21
INT4 = 22


def float_type(dtype_name):
    """'f32' / 'f16' -> numpy dtype."""
    return {"f32": np.float32, "f16": np.float16}[dtype_name]


def elem_type(np_dtype):
    return _TYPES[np.dtype(np_dtype)][0]


def uniform(rng, shape, dtype, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype(dtype)


def normal(rng, shape, dtype, std=1.0):
    return (rng.standard_normal(size=shape) * std).astype(dtype)


def int4_tensor(name, values, signed):
    """A packed INT4/UINT4 initializer (two per byte, low nibble first) from int values."""
    flat = np.asarray(values, dtype=np.int64).reshape(-1)
    nibbles = (flat & 0xF).astype(np.uint8)
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    packed = nibbles[0::2] | (nibbles[1::2] << 4)
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = INT4 if signed else UINT4
    tensor.dims.extend(np.shape(values))
    tensor.raw_data = packed.tobytes()
    return tensor


class Case:
    """One single-node model and its inputs.

    inputs:        graph inputs fed at run time, (name, array) in order
    initializers:  constant inputs, (name, array or TensorProto)
    outputs:       (name, numpy dtype) in the node's output order; "" skips an optional output
    masks:         output index -> bool array of the output's shape: only True elements are
                   compared (ORT leaves the rest unspecified, e.g. KV-cache rows past a sequence)
    extra_abs_tolerance: added to the dtype's tolerance where ORT legitimately deviates more,
                   with a bound derived from the data (MatMulNBits accuracy_level 4 rounds A to int8)
    describe:      a short human-readable summary of the parameters, printed on failure
    group:         the report row: the dtype, or dtype plus a variant whose errors differ in kind
    expected:      None (compare with ONNX Runtime), or the outputs of a float64 evaluation written
                   by the generator, for variants ORT does not implement (not run through ORT)
    """

    def __init__(self, op, dtype, domain=MS_DOMAIN, opset=21):
        self.op = op
        self.dtype = dtype
        self.domain = domain
        self.opset = opset
        self.inputs = []
        self.initializers = []
        self.node_inputs = []
        self.outputs = []
        self.attrs = {}
        self.masks = {}
        self.extra_abs_tolerance = 0.0
        self.describe = ""
        self.group = dtype
        self.expected = None

    def add_input(self, name, array):
        self.inputs.append((name, array))
        self.node_inputs.append(name)

    def reshape_input(self, name, shape):
        """Gives graph input `name` a new shape holding the same values."""
        self.inputs = [(n, a.reshape(shape) if n == name else a) for n, a in self.inputs]

    def replace_initializer(self, name, value):
        """Gives initializer `name` a new value (any shape)."""
        self.initializers = [(n, value if n == name else v) for n, v in self.initializers]

    def add_initializer(self, name, value):
        self.initializers.append((name, value))
        self.node_inputs.append(name)

    def skip_input(self):
        self.node_inputs.append("")

    def add_output(self, name, np_dtype):
        self.outputs.append((name, np_dtype))

    def model(self):
        outputs = [name for name, _ in self.outputs]
        while outputs and outputs[-1] == "":
            outputs.pop()
        inputs = list(self.node_inputs)
        while inputs and inputs[-1] == "":
            inputs.pop()
        node = helper.make_node(self.op, inputs, outputs, domain=self.domain, **self.attrs)
        graph_inputs = [helper.make_tensor_value_info(n, elem_type(a.dtype), a.shape) for n, a in self.inputs]
        graph_outputs = [helper.make_tensor_value_info(n, elem_type(t), None) for n, t in self.outputs if n]
        inits = [v if isinstance(v, TensorProto) else numpy_helper.from_array(np.asarray(v), n)
                 for n, v in self.initializers]
        graph = helper.make_graph([node], self.op, graph_inputs, graph_outputs, inits)
        opsets = [helper.make_opsetid("", self.opset), helper.make_opsetid(MS_DOMAIN, 1)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = 10
        return model


def write_case(case_dir, case):
    """Writes model.onnx, in/ (manifest.json + raw files) and masks; returns the cases.json entry."""
    in_dir = os.path.join(case_dir, "in")
    os.makedirs(in_dir, exist_ok=True)
    onnx.save(case.model(), os.path.join(case_dir, "model.onnx"))
    manifest = []
    for i, (name, array) in enumerate(case.inputs):
        file = f"input_{i}.bin"
        np.ascontiguousarray(array).tofile(os.path.join(in_dir, file))
        manifest.append({"name": name, "dtype": _TYPES[np.dtype(array.dtype)][1], "dims": list(array.shape), "file": file})
    with open(os.path.join(in_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    masks = {}
    present = [i for i, (name, _) in enumerate(case.outputs) if name]
    for index, mask in case.masks.items():
        file = f"mask_{index}.bin"
        np.ascontiguousarray(mask, dtype=np.uint8).tofile(os.path.join(case_dir, file))
        masks[str(present.index(index))] = file
    entry = {"op": case.op, "dtype": case.dtype, "group": case.group, "extra_abs_tolerance": case.extra_abs_tolerance,
             "describe": case.describe, "masks": masks}
    if case.expected is not None:
        write_tensors(os.path.join(case_dir, "expected"), [n for n, _ in case.outputs if n], case.expected)
        entry["reference"] = "float64"
    return entry


def write_tensors(folder, names, arrays):
    """A folder in ort_run.mjs's output format (manifest.json + output_<i>.bin)."""
    os.makedirs(folder, exist_ok=True)
    manifest = []
    for i, (name, array) in enumerate(zip(names, arrays)):
        file = f"output_{i}.bin"
        np.ascontiguousarray(array).tofile(os.path.join(folder, file))
        manifest.append({"name": name, "dtype": _TYPES[np.dtype(array.dtype)][1], "dims": list(array.shape), "file": file})
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
