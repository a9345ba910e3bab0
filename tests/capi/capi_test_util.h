// Helpers for tests of the C API: results as messages, handles that free themselves, and the
// default model's folder.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "onnx_genai/c_api.h"

namespace onnx_genai::testing {

inline const std::string kDefaultModel = std::string(OG_SOURCE_DIR) + "/models/debian-prose-11m";

// "" for success, else the result's message (the result is freed).
inline std::string message(OgaResult* result) {
  if (result == nullptr) return "";
  std::string text = OgaResultGetError(result);
  OgaDestroyResult(result);
  return text.empty() ? "(empty message)" : text;
}

template <typename T, void (*Destroy)(T*)>
struct Deleter {
  void operator()(T* p) const { Destroy(p); }
};
using ConfigPtr = std::unique_ptr<OgaConfig, Deleter<OgaConfig, OgaDestroyConfig>>;
using ModelPtr = std::unique_ptr<OgaModel, Deleter<OgaModel, OgaDestroyModel>>;
using TokenizerPtr = std::unique_ptr<OgaTokenizer, Deleter<OgaTokenizer, OgaDestroyTokenizer>>;
using StreamPtr = std::unique_ptr<OgaTokenizerStream, Deleter<OgaTokenizerStream, OgaDestroyTokenizerStream>>;
using SequencesPtr = std::unique_ptr<OgaSequences, Deleter<OgaSequences, OgaDestroySequences>>;
using TensorPtr = std::unique_ptr<OgaTensor, Deleter<OgaTensor, OgaDestroyTensor>>;
using StringsPtr = std::unique_ptr<OgaStringArray, Deleter<OgaStringArray, OgaDestroyStringArray>>;
using ParamsPtr = std::unique_ptr<OgaGeneratorParams, Deleter<OgaGeneratorParams, OgaDestroyGeneratorParams>>;
using GeneratorPtr = std::unique_ptr<OgaGenerator, Deleter<OgaGenerator, OgaDestroyGenerator>>;

inline std::string take_string(const char* text) {
  std::string copy = text != nullptr ? text : "";
  OgaDestroyString(text);
  return copy;
}

inline std::vector<int32_t> sequence(const OgaGenerator* generator, size_t index) {
  const int32_t* data = OgaGenerator_GetSequenceData(generator, index);
  return {data, data + OgaGenerator_GetSequenceCount(generator, index)};
}

}  // namespace onnx_genai::testing
