// A thin RAII layer over the C API for the Python module: handles that free themselves, and
// failed results thrown as std::runtime_error (which pybind11 raises as RuntimeError, with the
// library's message unchanged).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "onnx_genai/c_api.h"

namespace onnx_genai::python {

inline void check(OgaResult* result) {
  if (result == nullptr) return;
  std::string message = OgaResultGetError(result);
  OgaDestroyResult(result);
  throw std::runtime_error(message);
}

template <typename T, void (*Destroy)(T*)>
struct Deleter {
  void operator()(T* handle) const { Destroy(handle); }
};

using ConfigHandle = std::unique_ptr<OgaConfig, Deleter<OgaConfig, OgaDestroyConfig>>;
using ModelHandle = std::unique_ptr<OgaModel, Deleter<OgaModel, OgaDestroyModel>>;
using TokenizerHandle = std::unique_ptr<OgaTokenizer, Deleter<OgaTokenizer, OgaDestroyTokenizer>>;
using StreamHandle = std::unique_ptr<OgaTokenizerStream, Deleter<OgaTokenizerStream, OgaDestroyTokenizerStream>>;
using SequencesHandle = std::unique_ptr<OgaSequences, Deleter<OgaSequences, OgaDestroySequences>>;
using TensorHandle = std::unique_ptr<OgaTensor, Deleter<OgaTensor, OgaDestroyTensor>>;
using StringArrayHandle = std::unique_ptr<OgaStringArray, Deleter<OgaStringArray, OgaDestroyStringArray>>;
using ParamsHandle = std::unique_ptr<OgaGeneratorParams, Deleter<OgaGeneratorParams, OgaDestroyGeneratorParams>>;
using GeneratorHandle = std::unique_ptr<OgaGenerator, Deleter<OgaGenerator, OgaDestroyGenerator>>;
using EngineHandle = std::unique_ptr<OgaEngine, Deleter<OgaEngine, OgaDestroyEngine>>;
using RequestHandle = std::unique_ptr<OgaRequest, Deleter<OgaRequest, OgaDestroyRequest>>;

// Takes ownership of a string the C API allocated.
inline std::string take_string(const char* text) {
  std::string copy = text != nullptr ? text : "";
  OgaDestroyString(text);
  return copy;
}

}  // namespace onnx_genai::python
