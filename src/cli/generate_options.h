// `onnx-genai generate` arguments:
//   [MODEL] [--prompt TEXT] [--chat] [--system TEXT] [--max-new-tokens N] [--min-new-tokens N]
//   [--temperature F] [--top-k N] [--top-p F] [--min-p F] [--seed N] [--greedy] [--stop TEXT ...]
//   [--repetition-penalty F] [--no-repeat-ngram-size N]
//   [--ignore-eos] [--prefill-chunk N] [--truncate] [--threads N] [--device cpu|cuda[:N]]
//   [--mask-at-capacity on|off]
//   [--stream] [--stats] [--max-input-bytes N] [--tensor-parallel N | -tp N]
//   [--json-schema FILE | --json-object | --regex RE | --grammar FILE] [--fast-forward]
//                                                       (structured output, include/onnx_genai/constraints.h;
//                                                        fast-forward: genai::SpeculativeParams::fast_forward)
//   [--num-beams N] [--length-penalty F] [--early-stopping true|false|never] [--num-return-sequences N]
//                                                       (beam search, genai::BeamSearchParams)
//   [--speculative ngram|DRAFT_DIR] [--draft-tokens K] [--ngram-max N]
//                                                       (speculative decoding, cli/speculative_options.h)
// Options take their value as the next argument or after '=' (--top-k=40).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/run_support.h"
#include "cli/speculative_options.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cli {

struct GenerateOptions {
  std::string model_path;             // empty = the default model folder
  std::optional<std::string> prompt;  // unset = read stdin
  bool chat = false;                  // wrap the prompt in the model's chat template
  std::optional<std::string> system;  // chat system message
  std::optional<int64_t> max_new_tokens, min_new_tokens, prefill_chunk;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> no_repeat_ngram_size;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  bool greedy = false;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  bool truncate = false;  // cut a too-long prompt from the left
  genai::ModelOptions model;  // --threads, --device, --tensor-parallel
  std::optional<bool> mask_at_capacity;  // genai::ModelOptions::decode_mask_at_capacity
  bool stream = false;  // print text as it is generated (else once at the end)
  bool stats = false;   // timing and session numbers on stderr
  int64_t max_input_bytes = kDefaultMaxInputBytes;  // of the prompt on stdin
  std::optional<std::string> json_schema_file;  // output valid under this JSON Schema
  bool json_object = false;                     // output any JSON object
  std::optional<std::string> regex;             // output matching this regex in full
  std::optional<std::string> grammar_file;      // output a sentence of this Lark-style grammar
  bool fast_forward = false;                    // draft the text the constraint forces
  std::optional<int32_t> num_beams, num_return_sequences;
  std::optional<float> length_penalty;
  std::optional<genai::EarlyStopping> early_stopping;
  SpeculativeOptions speculative;

  // Any of the distribution flags asks for sampling (unless --greedy).
  bool asks_for_sampling() const { return temperature || top_p || min_p || top_k; }
};

// Parses the arguments after `generate`; errors name the offending argument.
Result<GenerateOptions> parse_generate_options(std::span<const std::string> args);

}  // namespace onnx_genai::cli
