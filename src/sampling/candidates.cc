#include <limits>

#include "onnx_genai/sampling.h"

namespace onnx_genai {

void Candidates::assign(std::span<const float> logits) {
  // Same size every step, so after the first call this reuses the buffers.
  logits_.assign(logits.begin(), logits.end());
  ids_.resize(logits_.size());
  size_t in_play = 0;
  for (size_t id = 0; id < logits_.size(); ++id) {  // branch-free compaction
    ids_[in_play] = static_cast<int32_t>(id);
    in_play += logits_[id] != kOut;
  }
  ids_.resize(in_play);
}

}  // namespace onnx_genai
