// What a loaded Model holds, shared with the Generator (src/genai/model.cc builds it).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "genai/decoder_io.h"
#include "genai/kv_cache.h"
#include "genai/package.h"
#include "onnx_genai/chat_template.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/session.h"
#include "onnx_genai/tokenizer.h"
#include "runtime/tensor_parallel_session.h"

namespace onnx_genai::genai {

struct ModelParts {
  Package package;
  // The decoder: `single`, or with tensor parallelism (ModelOptions::tensor_parallel > 1) rank 0's
  // of `ranks`. Only DecoderRanks (decoder_ranks.h) and the engine's PagedRunner may run it then:
  // a rank run alone waits forever in its first collective.
  Session* session = nullptr;
  std::unique_ptr<Session> single;
  std::unique_ptr<TensorParallelSessions> ranks;
  std::vector<DecoderIo> rank_io;  // ranks 1..N-1's (rank 0's is `io`); each has kv_heads / N
  std::string device_fallback;  // why the decoder runs on the CPU instead of the GPU asked for
  DecoderIo io;
  ModelInfo info;
  KvCacheOptions kv_options;
  bool decode_mask_at_capacity = false;  // ModelOptions::decode_mask_at_capacity, resolved
  PagedRewrite paged;  // the paged-attention rewrite's result (ModelOptions::kv_block_size)
  int64_t kv_block_size = 0;
  std::unique_ptr<Tokenizer> tokenizer;
  // Loaded on first use: a package may have a template that only --chat needs.
  mutable std::once_flag chat_templates_once;
  mutable std::optional<Result<ChatTemplates>> chat_templates;
  // Token bytes for constraints and the constraints compiled lately against them
  // (genai/constraint_processor.h), prepared on first use.
  mutable std::once_flag constraints_once;
  mutable std::optional<Result<std::unique_ptr<ConstraintCache>>> constraints;
};

struct Model::Impl : ModelParts {};

// Read access to a loaded Model's parts for genai-layer code other than the Generator (perplexity.cc).
struct ModelAccess {
  static const ModelParts& parts(const Model& model) { return *model.impl_; }
};

}  // namespace onnx_genai::genai
