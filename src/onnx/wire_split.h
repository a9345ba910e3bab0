// Zero-copy initializers. Parsing a ModelProto with protobuf copies every raw_data payload into
// a std::string; for a multi-gigabyte model that doubles memory and load time. Instead we walk
// the protobuf wire format once, record where each top-level initializer's raw_data lies in the
// mapped file, and hand protobuf a copy of the model with those payloads cut out. Tensors then
// point straight into the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai {

struct ByteSpan {
  size_t offset = 0;
  size_t length = 0;
};

struct SplitModel {
  std::string stripped;  // the ModelProto without graph.initializer[*].raw_data
  // One entry per graph.initializer, in file order: where its raw_data was, if it had one.
  std::vector<std::optional<ByteSpan>> raw_data;
};

Result<SplitModel> split_initializer_payloads(const uint8_t* data, size_t size);

}  // namespace onnx_genai
