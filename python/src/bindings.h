// The Python classes (onnx_genai.Model, Tokenizer, ...) as C++ structs over C API handles, and
// the functions that register them with the module.
#pragma once

#include <map>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "oga.h"

namespace onnx_genai::python {

namespace py = pybind11;

struct Config {
  ConfigHandle handle;
};
struct Model {
  ModelHandle handle;
};
struct Tensor {
  TensorHandle handle;  // owns its data (made from a copy of the numpy array)
};
struct Tokenizer {
  TokenizerHandle handle;
};
struct TokenizerStream {
  StreamHandle handle;
};
struct GeneratorParams {
  ParamsHandle handle;
};
struct Generator {
  GeneratorHandle handle;
};
struct Request {
  RequestHandle handle;
  py::object opaque = py::none();  // set_opaque_data's object, kept alive here
};
struct Engine {
  // The Python objects of the added requests, so that step() returns the object the caller
  // added (onnxruntime_genai's examples find their requests by identity).
  std::map<OgaRequest*, py::object> added;
  EngineHandle handle;  // declared last, so destroyed first: requests outlive it detached
};

// An int32 C-contiguous copy of `tokens` (a list or any integer array).
using TokenArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

// A Tensor over a copy of `array` (float32, int32 or int64).
Tensor tensor_from_numpy(const py::array& array);
py::array tensor_to_numpy(OgaTensor* tensor);

void bind_model(py::module_& m);      // Config, Model, Tensor, Tokenizer, TokenizerStream
void bind_generator(py::module_& m);  // GeneratorParams, Generator
void bind_engine(py::module_& m);     // Engine, Request

}  // namespace onnx_genai::python
