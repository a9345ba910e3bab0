// What the generator feeds a decoder and reads back, derived from the graph's declared inputs and
// outputs plus the package config, never from the architecture's name:
//
//   input_ids [B, S], attention_mask [B, T], position_ids [B, S] (optional), use_cache_branch
//   (Optimum merged decoders, optional), per layer a past key and value [B, kv_heads, P, head_size]
//   -> logits [B, S, vocab] (or [B, 1, vocab]) and the matching present key and value; on a device
//   also onnx_genai.greedy_tokens [B, S] (or [B, 1]), the logits' argmax (greedy_output.h), and
//   onnx_genai.sampled_tokens [B], drawn from the logits by the inputs onnx_genai.sampling_params
//   and onnx_genai.sampling_uniforms (device_sampling.h).
//
// Past inputs pair with present outputs by layer number and kind: genai_config.json's templates
// ("past_key_values.%d.key") when it gives them, else any names holding "past" / "present", one
// number (the layer) and "key" / "value" (past_key_values.N.key <-> present.N.key, past_key_N <->
// present_key_N, ...). Every input must get a role, or loading fails naming the input.
//
// Two cache disciplines follow from the graph:
//   shared buffer   present is past's buffer, written in place at each row's length
//                   (GroupQueryAttention; or present's sequence dim has past's symbol); rows are
//                   right-padded, and attention reads each row's length from the mask's sum
//   concatenated    present = Concat(past, new) is a new, longer tensor; rows are left-padded
//                   (Hugging Face's convention) and the mask marks the pads
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "genai/package.h"
#include "runtime/paged_attention_pass.h"
#include "onnx_genai/session.h"

namespace onnx_genai::genai {

// kLogitRows: the input runtime/generation_passes.h adds (select_logit_rows), [B, R, hidden] positions whose logits to compute.
// kSamplingParams, kSamplingUniforms, kSamplingMask: the inputs runtime/generation_passes.h adds (device_sampling.h fills them).
enum class InputRole {
  kInputIds,
  kAttentionMask,
  kPositionIds,
  kUseCacheBranch,
  kPastKv,
  kLogitRows,
  kSamplingParams,
  kSamplingUniforms,
  kSamplingMask,
  // The paged graph's (runtime/paged_attention_pass.h): block tables, per-sequence token offsets
  // and lengths, and per layer a key or value block pool (bound to kv like a past input).
  kBlockTables,
  kQueryStarts,
  kSeqLens,
  kPagedCache,
};

struct KvBinding {
  int64_t layer = 0;
  bool is_value = false;
  size_t past_input = 0;      // index in Session::inputs()
  size_t present_output = 0;  // index in Session::outputs()
};

// Facts read from the graph's nodes before the session takes it over.
struct GraphFacts {
  std::set<std::string> inputs_read_by_gqa;  // graph inputs that feed a GroupQueryAttention past
  // attention_mask only feeds a ReduceSum and, through its Shape, GroupQueryAttention's
  // total_sequence_length (onnxruntime-genai's builder graphs)
  bool mask_only_sets_lengths = false;
  // Set when the graph was rewritten to paged attention: its cache inputs and outputs per layer.
  const PagedRewrite* paged = nullptr;
};

struct DecoderIo {
  std::vector<InputRole> roles;  // one per Session input
  size_t logits_output = 0;
  DType logits_dtype = DType::kUndefined;
  std::optional<size_t> greedy_tokens_output;  // greedy_output.h's output, when the graph has it
  std::optional<size_t> sampled_tokens_output;  // device_sampling.h's output, when the graph has it
  int64_t vocab_size = 0;
  std::vector<KvBinding> kv;  // layer-major, key before value
  int64_t num_layers = 0;
  DType kv_dtype = DType::kUndefined;
  int64_t kv_heads = 0, head_size = 0;
  bool shared_buffer = false;  // present written into past's storage
  bool right_padding = false;  // rows start at cache slot 0 (attention uses each row's length)
  bool paged = false;          // packed rows over block pools (kv binds each pool and its output)
  int64_t logit_rows_width = 0;  // the hidden size a kLogitRows input repeats each position over
  std::vector<std::string> warnings;  // config values the graph contradicts (the graph's are used)

  bool has(InputRole role) const;
};

// Errors name the input or output that cannot be mapped and say what was expected.
Result<DecoderIo> derive_decoder_io(const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs,
                                    const Package& package, const GraphFacts& facts);

}  // namespace onnx_genai::genai
