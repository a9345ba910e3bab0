// What the C API's opaque handles hold, and the guard every exported function runs its body in:
// no C++ exception leaves the library, and a failed Status becomes an OgaResult.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi/engine_bridge.h"
#include "capi/generator_bridge.h"
#include "capi/search_options.h"
#include "onnx_genai/c_api.h"
#include "onnx_genai/chat_template.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/tokenizer.h"

struct OgaResult {
  std::string message;
};

struct OgaSequences {
  std::vector<std::vector<int32_t>> rows;
};

struct OgaStringArray {
  std::vector<std::string> strings;
};

struct OgaTensor {
  OgaElementType type = OgaElementType_undefined;
  std::vector<int64_t> shape;
  std::vector<unsigned char> owned;  // empty when the tensor borrows the caller's buffer
  void* data = nullptr;

  size_t elements() const;
};

// A package path and its genai_config.json with the caller's overlays merged in.
struct OgaConfig {
  std::string path;
  nlohmann::json file;    // genai_config.json as read ({} for a Hugging Face package)
  nlohmann::json merged;  // `file` with every overlay and provider change applied
};

struct OgaModel {
  std::unique_ptr<onnx_genai::genai::Model> model;
  std::string path;                         // as given, and the options it was loaded with:
  onnx_genai::genai::ModelOptions options;  // an engine loads its own copy from them
  std::string dir;             // the package folder (chat templates are read from it)
  nlohmann::json search_overlay;  // search.* values the overlays changed
};

struct OgaTokenizer {
  const OgaModel* owner = nullptr;
  const onnx_genai::Tokenizer* tokenizer = nullptr;
  mutable std::optional<onnx_genai::Result<onnx_genai::ChatTemplates>> templates;  // read on first use
};

struct OgaTokenizerStream {
  explicit OgaTokenizerStream(const onnx_genai::Tokenizer& tokenizer)
      : detokenizer(tokenizer, onnx_genai::DecodeOptions{.skip_special_tokens = true}) {}
  onnx_genai::StreamingDetokenizer detokenizer;
  std::string last;  // what the last decode returned; the caller's pointer points into it
};

struct OgaGeneratorParams {
  const OgaModel* owner = nullptr;
  onnx_genai::capi::SearchOptions search;
};

struct OgaGenerator {
  explicit OgaGenerator(onnx_genai::capi::GeneratorBridge b) : bridge(std::move(b)) {}
  onnx_genai::capi::GeneratorBridge bridge;
};

struct OgaEngine {
  std::unique_ptr<onnx_genai::capi::EngineBridge> bridge;
};

namespace onnx_genai::capi {

// The result returned when even an error result cannot be allocated; OgaDestroyResult leaves it.
OgaResult* out_of_memory_result();

// Null for success, as the C API promises.
inline OgaResult* to_result(const Status& status) {
  if (status.is_ok()) return nullptr;
  try {
    return new OgaResult{status.message()};
  } catch (...) {
    return out_of_memory_result();
  }
}

// Runs `body` (returning Status) and turns what it returns or throws into an OgaResult*.
template <typename Body>
OgaResult* guard(const char* function, Body&& body) {
  try {
    return to_result(body().with_context(function));
  } catch (const std::bad_alloc&) {
    return to_result(Status::error(std::string(function) + ": out of memory"));
  } catch (const std::exception& e) {
    return to_result(Status::error(std::string(function) + ": " + e.what()));
  } catch (...) {
    return to_result(Status::error(std::string(function) + ": unexpected failure"));
  }
}

// "OgaX: `name` is NULL" when `pointer` is null.
inline Status require(const void* pointer, const char* name) {
  return pointer != nullptr ? Status::ok() : Status::error(std::string(name) + " is NULL");
}

// A copy the caller frees with OgaDestroyString.
const char* copy_string(const std::string& text);

}  // namespace onnx_genai::capi
