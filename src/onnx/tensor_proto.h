// onnx::TensorProto -> Tensor: raw data in place (when aligned), typed fields decoded, external
// data memory-mapped and bounds-checked.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "onnx/mapped_file.h"
#include "onnx/model.h"
#include "onnx/wire_split.h"
#include "onnx_genai/tensor.h"

namespace onnx {
class TensorProto;
}

namespace onnx_genai {

// Where a tensor's bytes may come from besides the proto itself.
class TensorSource {
 public:
  // `base_dir`: folder external data paths are relative to. `file`: the model bytes that
  // split raw_data spans index into, kept alive by `owner`.
  TensorSource(std::string base_dir, const uint8_t* file, std::shared_ptr<const void> owner, LoadStats* stats)
      : base_dir_(std::move(base_dir)), file_(file), owner_(std::move(owner)), stats_(stats) {}

  // `raw` is the span of raw_data cut out by split_initializer_payloads, if any.
  Result<Tensor> to_tensor(const onnx::TensorProto& proto, std::optional<ByteSpan> raw = std::nullopt);

 private:
  Result<Tensor> from_bytes(const std::string& what, DType dtype, Shape shape, const uint8_t* bytes,
                            size_t length, std::shared_ptr<const void> owner);
  Result<Tensor> from_external(const std::string& what, const onnx::TensorProto& proto, DType dtype, Shape shape);

  std::string base_dir_;
  const uint8_t* file_;
  std::shared_ptr<const void> owner_;
  LoadStats* stats_;
  std::map<std::string, std::shared_ptr<MappedFile>> external_files_;
};

}  // namespace onnx_genai
