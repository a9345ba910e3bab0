// onnx_genai._onnx_genai: tensors as numpy arrays, GeneratorParams and Generator. The model runs
// with the GIL released (append, generate_next_token, get_logits), so other Python threads go
// on while a generator works.
#include <cstring>
#include <string>

#include <pybind11/stl.h>

#include "bindings.h"

namespace onnx_genai::python {

namespace {

OgaElementType element_type(const py::dtype& dtype) {
  if (dtype.is(py::dtype::of<float>())) return OgaElementType_float32;
  if (dtype.is(py::dtype::of<int32_t>())) return OgaElementType_int32;
  if (dtype.is(py::dtype::of<int64_t>())) return OgaElementType_int64;
  throw std::runtime_error("arrays must be float32, int32 or int64, got " + py::repr(dtype).cast<std::string>());
}

GeneratorParams make_params(const Model& model) {
  OgaGeneratorParams* params = nullptr;
  check(OgaCreateGeneratorParams(model.handle.get(), &params));
  return GeneratorParams{ParamsHandle(params)};
}

// onnxruntime_genai's set_search_options(**kwargs): bools by SetSearchBool, numbers by SetSearchNumber.
void set_search_options(GeneratorParams& params, const py::kwargs& options) {
  for (const auto& [key, value] : options) {
    const std::string name = py::str(key);
    if (py::isinstance<py::bool_>(value)) {
      check(OgaGeneratorParamsSetSearchBool(params.handle.get(), name.c_str(), value.cast<bool>()));
    } else if (py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value)) {
      check(OgaGeneratorParamsSetSearchNumber(params.handle.get(), name.c_str(), value.cast<double>()));
    } else {
      throw std::runtime_error("search option '" + name + "' must be a bool, an int or a float");
    }
  }
}

py::dict get_search_options(const GeneratorParams& params) {
  py::dict options;
  for (const char* name : {"max_length", "min_length", "top_k", "top_p", "temperature", "repetition_penalty",
                           "no_repeat_ngram_size", "num_beams", "num_return_sequences", "length_penalty",
                           "diversity_penalty", "random_seed", "batch_size"}) {
    double value = 0;
    check(OgaGeneratorParamsGetSearchNumber(params.handle.get(), name, &value));
    options[name] = value;
  }
  for (const char* name : {"do_sample", "early_stopping", "past_present_share_buffer"}) {
    bool value = false;
    check(OgaGeneratorParamsGetSearchBool(params.handle.get(), name, &value));
    options[name] = value;
  }
  return options;
}

Generator make_generator(const Model& model, const GeneratorParams& params) {
  OgaGenerator* generator = nullptr;
  check(OgaCreateGenerator(model.handle.get(), params.handle.get(), &generator));
  return Generator{GeneratorHandle(generator)};
}

void append_tokens(Generator& g, const TokenArray& tokens) {
  const int32_t* data = tokens.data();
  const auto count = static_cast<size_t>(tokens.size());
  py::gil_scoped_release unlocked;
  check(OgaGenerator_AppendTokens(g.handle.get(), data, count));
}

void append_tensor(Generator& g, const Tensor& tokens) {
  py::array array = tensor_to_numpy(tokens.handle.get());
  append_tokens(g, TokenArray::ensure(array));
}

py::array_t<int32_t> int32_array(const int32_t* data, size_t count) {
  py::array_t<int32_t> array(static_cast<py::ssize_t>(count));
  if (count > 0) std::copy_n(data, count, array.mutable_data());
  return array;
}

py::array get_logits(Generator& g) {
  OgaTensor* raw = nullptr;
  {
    py::gil_scoped_release unlocked;  // may run the model (the step ahead)
    check(OgaGenerator_GetLogits(g.handle.get(), &raw));
  }
  const TensorHandle logits(raw);
  return tensor_to_numpy(raw);
}

void set_logits(Generator& g, const py::array_t<float, py::array::c_style | py::array::forcecast>& logits) {
  std::vector<int64_t> shape(logits.shape(), logits.shape() + logits.ndim());
  OgaTensor* raw = nullptr;
  check(OgaCreateTensorFromBuffer(const_cast<float*>(logits.data()), shape.data(), shape.size(),
                                  OgaElementType_float32, &raw));
  const TensorHandle tensor(raw);
  check(OgaGenerator_SetLogits(g.handle.get(), raw));
}

}  // namespace

Tensor tensor_from_numpy(const py::array& array) {
  const OgaElementType type = element_type(array.dtype());
  const py::array contiguous = py::array::ensure(array, py::array::c_style);
  std::vector<int64_t> shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  OgaTensor* raw = nullptr;
  check(OgaCreateTensorFromBuffer(nullptr, shape.data(), shape.size(), type, &raw));
  TensorHandle tensor(raw);
  void* data = nullptr;
  check(OgaTensorGetData(raw, &data));
  std::memcpy(data, contiguous.data(), static_cast<size_t>(contiguous.nbytes()));
  return Tensor{std::move(tensor)};
}

py::array tensor_to_numpy(OgaTensor* tensor) {
  size_t rank = 0;
  check(OgaTensorGetShapeRank(tensor, &rank));
  std::vector<int64_t> shape(rank);
  check(OgaTensorGetShape(tensor, shape.data(), rank));
  OgaElementType type = OgaElementType_undefined;
  check(OgaTensorGetType(tensor, &type));
  void* data = nullptr;
  check(OgaTensorGetData(tensor, &data));
  const py::dtype dtype = type == OgaElementType_float32 ? py::dtype::of<float>()
                          : type == OgaElementType_int32 ? py::dtype::of<int32_t>()
                                                         : py::dtype::of<int64_t>();
  py::array copy(dtype, std::vector<py::ssize_t>(shape.begin(), shape.end()));
  std::memcpy(copy.mutable_data(), data, static_cast<size_t>(copy.nbytes()));
  return copy;
}

void bind_generator(py::module_& m) {
  py::class_<GeneratorParams>(m, "GeneratorParams")
      .def(py::init(&make_params), py::arg("model"), py::keep_alive<1, 2>())
      .def("set_search_options", &set_search_options)
      .def("set_guidance",
           [](GeneratorParams& params, const std::string& type, const std::string& data, bool enable_ff_tokens) {
             py::gil_scoped_release unlocked;  // compiles the constraint (the first one reads the vocabulary)
             check(OgaGeneratorParamsSetGuidance(params.handle.get(), type.c_str(), data.c_str(), enable_ff_tokens));
           },
           py::arg("type"), py::arg("data"), py::arg("enable_ff_tokens") = false)
      .def("get_search_options", &get_search_options);
  py::class_<Generator>(m, "Generator")
      .def(py::init(&make_generator), py::arg("model"), py::arg("params"), py::keep_alive<1, 2>())
      .def("append_tokens", &append_tensor, py::arg("tokens"))
      .def("append_tokens", &append_tokens, py::arg("tokens"))
      .def("generate_next_token",
           [](Generator& g) {
             py::gil_scoped_release unlocked;
             check(OgaGenerator_GenerateNextToken(g.handle.get()));
           })
      .def("is_done", [](const Generator& g) { return OgaGenerator_IsDone(g.handle.get()); })
      .def("get_next_tokens",
           [](const Generator& g) {
             const int32_t* tokens = nullptr;
             size_t count = 0;
             check(OgaGenerator_GetNextTokens(g.handle.get(), &tokens, &count));
             return int32_array(tokens, count);
           })
      .def("get_sequence",
           [](const Generator& g, size_t index) {
             return int32_array(OgaGenerator_GetSequenceData(g.handle.get(), index),
                                OgaGenerator_GetSequenceCount(g.handle.get(), index));
           }, py::arg("index"))
      .def("rewind_to", [](Generator& g, size_t length) { check(OgaGenerator_RewindTo(g.handle.get(), length)); },
           py::arg("new_length"))
      .def("get_logits", &get_logits)
      .def("set_logits", &set_logits, py::arg("logits"))
      .def("token_count", [](const Generator& g) { return OgaGenerator_TokenCount(g.handle.get()); });
}

}  // namespace onnx_genai::python
