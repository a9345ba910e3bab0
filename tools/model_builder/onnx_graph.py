"""A small ONNX graph writer shared by the graph styles, and the model saver.

Nodes are named after the value they produce, so names read like the builder's code. Weights
are written either inside model.onnx or to model.onnx.data with every tensor's offset aligned to
64 bytes, so a loader can map them in place (and SIMD loads from the mapping stay aligned).
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

EXTERNAL_ALIGNMENT = 64
# Past this many bytes of weights a model cannot be one protobuf (2 GiB limit): external data.
AUTO_EXTERNAL_BYTES = 1 << 30
# Small tensors (shape constants, norm weights of tiny models) stay inline even in external mode.
EXTERNAL_MIN_BYTES = 1024

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.bool_): TensorProto.BOOL,
}


class Graph:
    def __init__(self, name, float_dtype):
        self.name = name
        self.float_dtype = np.dtype(float_dtype)  # dtype of activations and float weights
        self.nodes = []
        self.initializers = {}
        self.element_types = {}  # initializers whose ONNX type numpy has no dtype for (float8e8m0 as uint8)
        self.inputs = []
        self.outputs = []
        self._constants = {}

    @property
    def float_type(self):
        return NP_TO_ONNX[self.float_dtype]

    def node(self, op, inputs, name, outputs=1, domain="", **attributes):
        """Adds a node named `name`; returns its output name (or list of names when outputs > 1).

        `outputs` may also be an explicit list of names ("" for an unused optional output)."""
        if isinstance(outputs, int):
            outputs = [f"{name}/output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), name=name, domain=domain or None,
                                           **attributes))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def initializer(self, name, array, elem_type=None):
        """A named initializer; elem_type gives the ONNX element type of bytes numpy cannot name."""
        if name in self.initializers:
            raise ValueError(f"initializer {name} defined twice")
        self.initializers[name] = np.ascontiguousarray(array)
        if elem_type is not None:
            self.element_types[name] = elem_type
        return name

    def weight(self, name, array):
        """A float initializer stored in the graph's float dtype."""
        return self.initializer(name, np.asarray(array).astype(self.float_dtype))

    def constant(self, value, dtype):
        """A shared named initializer for a small constant (shape arguments, scalars)."""
        array = np.array(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:
            label = np.array2string(array, separator=",").replace(" ", "").replace("\n", "")
            self._constants[key] = self.initializer(f"/constants/{array.dtype.name}/{label}", array)
        return self._constants[key]

    def i64(self, value):
        return self.constant(value, np.int64)

    def scalar(self, value):
        """A float scalar in the graph's float dtype."""
        return self.constant(value, self.float_dtype)

    def softcap(self, name, x, cap, outputs=1):
        """cap * tanh(x / cap)."""
        scaled = self.node("Div", [x, self.scalar(cap)], f"{name}/Div")
        bounded = self.node("Tanh", [scaled], f"{name}/Tanh")
        return self.node("Mul", [bounded, self.scalar(cap)], f"{name}/Mul", outputs=outputs)

    def add_input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def add_output(self, name, elem_type, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def add_decoder_io(self, cfg, position_ids):
        """The inputs and outputs both styles share (position_ids optional):
        input_ids, attention_mask [B, T], past_key_values.{i}.key/value [B, kv, P, hd] ->
        logits [B, S, vocab], present.{i}.key/value [B, kv, T, hd]."""
        self.add_input("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
        self.add_input("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])
        if position_ids:
            self.add_input("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
        cache = [(i, kind) for i in range(cfg.num_hidden_layers) for kind in ("key", "value")]
        for i, kind in cache:
            self.add_input(f"past_key_values.{i}.{kind}", self.float_type,
                           ["batch_size", cfg.num_key_value_heads, "past_sequence_length", cfg.head_dim])
        self.add_output("logits", self.float_type, ["batch_size", "sequence_length", cfg.vocab_size])
        for i, kind in cache:
            self.add_output(f"present.{i}.{kind}", self.float_type,
                            ["batch_size", cfg.num_key_value_heads, "total_sequence_length", cfg.head_dim])

    def to_model(self, opsets, ir_version, producer="onnx-genai tools/build_model.py"):
        """The finished graph, to write with save_model (its weights stay numpy arrays until then:
        a 7B model's cannot all sit in protobuf messages, whose size limit is 2 GiB)."""
        return BuiltModel(self, opsets, ir_version, producer)


class BuiltModel:
    def __init__(self, graph, opsets, ir_version, producer):
        self.graph, self.opsets, self.ir_version, self.producer = graph, opsets, ir_version, producer

    def proto(self, initializers):
        g = self.graph
        graph = helper.make_graph(g.nodes, g.name, g.inputs, g.outputs, initializers)
        model = helper.make_model(graph, producer_name=self.producer,
                                  opset_imports=[helper.make_opsetid(d, v) for d, v in self.opsets.items()])
        model.ir_version = self.ir_version
        return model


def _inline_tensor(name, array, elem_type):
    tensor = numpy_helper.from_array(array, name)
    if elem_type is not None:
        tensor.data_type = elem_type
    return tensor


def _external_tensor(name, array, location, offset, elem_type):
    tensor = TensorProto(name=name, data_type=elem_type or NP_TO_ONNX[array.dtype], dims=array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", array.nbytes)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return tensor


def save_model(model, path, external_data=False):
    """Writes `path`; with external data (forced past AUTO_EXTERNAL_BYTES) tensors of at least
    EXTERNAL_MIN_BYTES go to `path`.data, each at an offset that is a multiple of 64."""
    arrays, types = model.graph.initializers, model.graph.element_types
    data_name = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(path), data_name)
    if os.path.exists(data_path):
        os.remove(data_path)
    if not (external_data or sum(a.nbytes for a in arrays.values()) > AUTO_EXTERNAL_BYTES):
        initializers = [_inline_tensor(name, array, types.get(name)) for name, array in arrays.items()]
    else:
        initializers = []
        with open(data_path, "wb") as data:
            for name, array in arrays.items():
                if array.nbytes < EXTERNAL_MIN_BYTES:
                    initializers.append(_inline_tensor(name, array, types.get(name)))
                    continue
                data.write(b"\0" * (-data.tell() % EXTERNAL_ALIGNMENT))
                initializers.append(_external_tensor(name, array, data_name, data.tell(), types.get(name)))
                data.write(array.tobytes())
    with open(path, "wb") as f:
        f.write(model.proto(initializers).SerializeToString())
