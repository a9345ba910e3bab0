// onnxruntime-genai's generator protocol over genai::Generator.
//
// onnxruntime-genai separates computing the next logits (append_tokens, get_logits) from picking
// a token (generate_next_token); genai::Generator::generate_next() does both in one call. So:
//
//   - the generator starts on the first append (genai::Generator wants its prompts up front);
//   - every sequence's sampler runs a RowProcessor first (SamplingParams::first_processor), which
//     copies the model's row out (capture) or puts the caller's row in (replace);
//   - get_logits runs the step ahead with capture on and keeps its token hidden ("lookahead"):
//     a generate_next_token that follows just reveals it, so reading logits costs nothing and a
//     seeded run picks the same tokens whether or not it reads them;
//   - set_logits after such a lookahead rewinds it (one extra one-token decoder run, and the
//     sampler's draw is not replayed) and the next step replaces the rows.
// With beam search (num_beams > 1) the sequences are the returned hypotheses (see
// genai::Generator), and get_logits / set_logits are refused.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "capi/search_options.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::capi {

// Shared by a bridge and the processors its sequences' samplers run first.
struct LogitRows {
  enum class Mode { kPass, kCapture, kReplace };
  Mode mode = Mode::kPass;
  size_t batch = 0;
  size_t vocab = 0;
  std::vector<float> rows;  // [batch, vocab]: captured, or the caller's replacement
  size_t processors_made = 0;  // the next processor made serves this sequence
};

class GeneratorBridge {
 public:
  GeneratorBridge(const genai::Model& model, SearchOptions options);

  // `ids`: batch_size rows of equal length, row after row.
  Status append_tokens(std::span<const int32_t> ids);
  Status append_sequences(const std::vector<std::vector<int32_t>>& rows);
  Status generate_next_token();
  Status rewind_to(size_t length);
  // [batch_size * vocab_size] floats.
  Result<std::span<const float>> logits();
  Status set_logits(std::span<const float> rows);

  bool is_done() const;
  size_t batch_size() const { return batch_; }
  // Sequences the generator reports: batch_size, or batch_size * num_return_sequences with beam
  // search (prompt p's k-th best is p * num_return_sequences + k).
  size_t sequence_count() const { return generator_ ? generator_->batch_size() : batch_; }
  size_t vocab_size() const { return rows_->vocab; }
  std::span<const int32_t> sequence(size_t index) const;
  std::span<const int32_t> next_tokens() const { return next_; }
  size_t token_count() const;

 private:
  Status start(std::vector<std::vector<int32_t>> prompts);
  Status step(LogitRows::Mode mode, std::vector<int32_t>& picked);
  Status drop_lookahead();
  // get_logits / set_logits have no meaning for beams that trade places every step.
  Status check_no_beams(const char* call) const;

  const genai::Model* model_;
  SearchOptions options_;
  size_t batch_;
  std::shared_ptr<LogitRows> rows_;
  std::unique_ptr<genai::Generator> generator_;  // null until the first append
  // Slots of the longest sequence as genai::Generator::rewind counts them (finished sequences'
  // filler included), to rewind exactly one step.
  size_t longest_ = 0;
  bool lookahead_ = false;  // generator_ holds one step the caller has not asked for yet
  bool replaced_ = false;   // set_logits gave the rows of the next step
  std::vector<size_t> visible_;       // while looking ahead: each sequence's length before the step
  std::vector<int32_t> next_;         // what get_next_tokens reports
  std::vector<int32_t> ahead_next_;   // the hidden step's tokens
};

}  // namespace onnx_genai::capi
