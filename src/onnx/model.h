// A loaded ONNX model: the graph IR plus what keeps its weights alive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

struct LoadStats {
  int64_t initializer_bytes_mapped = 0;  // served straight from the file mapping
  int64_t initializer_bytes_copied = 0;  // decoded from typed fields or realigned
};

struct Model {
  std::string path;
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::map<std::string, std::string> metadata;
  std::shared_ptr<Graph> graph;
  LoadStats stats;
};

// Loads `path`. External data is resolved relative to the model's folder.
Result<std::shared_ptr<Model>> load_onnx_model(const std::string& path);

// Loads a model held in memory (fuzzing, embedded models). `owner` keeps `data` alive; external
// data is resolved relative to `base_dir`; `name` is used in error messages.
Result<std::shared_ptr<Model>> load_onnx_model_from_memory(const uint8_t* data, size_t size,
                                                           std::shared_ptr<const void> owner,
                                                           const std::string& base_dir, const std::string& name);

}  // namespace onnx_genai
