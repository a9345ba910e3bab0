// onnxruntime-genai's generator protocol over genai::Generator (see generator_bridge.h).
#include "capi/generator_bridge.h"

#include <algorithm>
#include <string>

namespace onnx_genai::capi {

namespace {

// Reads or replaces one sequence's row before any other processor sees it.
class RowProcessor final : public LogitProcessor {
 public:
  RowProcessor(std::shared_ptr<LogitRows> rows, size_t sequence) : rows_(std::move(rows)), sequence_(sequence) {}
  std::string_view name() const override { return "capi_logits"; }

  Status apply(const TokenHistory& /*history*/, Candidates& candidates) override {
    LogitRows& rows = *rows_;
    if (rows.mode == LogitRows::Mode::kPass) return Status::ok();
    if (sequence_ >= rows.batch || static_cast<size_t>(candidates.vocab_size()) != rows.vocab) {
      return OG_ERROR("logits of sequence ", sequence_, " (", candidates.vocab_size(), " wide) do not fit a batch of ",
                      rows.batch, " rows of ", rows.vocab);
    }
    float* row = rows.rows.data() + sequence_ * rows.vocab;
    if (rows.mode == LogitRows::Mode::kCapture) {
      const std::span<const float> raw = candidates.logits();
      std::copy(raw.begin(), raw.end(), row);
      return Status::ok();
    }
    for (size_t id = 0; id < rows.vocab; ++id) candidates.set_logit(static_cast<int32_t>(id), row[id]);
    return Status::ok();
  }

 private:
  std::shared_ptr<LogitRows> rows_;
  size_t sequence_;
};

// Trailing pad tokens are a padded batch's padding (OgaTokenizerEncodeBatch pads on the right).
std::vector<int32_t> without_padding(std::span<const int32_t> row, int32_t pad) {
  size_t end = row.size();
  while (end > 0 && row[end - 1] == pad) --end;
  return {row.begin(), row.begin() + static_cast<std::ptrdiff_t>(end)};
}

}  // namespace

GeneratorBridge::GeneratorBridge(const genai::Model& model, SearchOptions options)
    : model_(&model),
      options_(std::move(options)),
      batch_(static_cast<size_t>(options_.batch_size)),
      rows_(std::make_shared<LogitRows>()) {
  rows_->batch = batch_;
  rows_->vocab = static_cast<size_t>(model.info().vocab_size);
}

Status GeneratorBridge::start(std::vector<std::vector<int32_t>> prompts) {
  if (prompts.size() != batch_) {
    return OG_ERROR("batch_size is ", batch_, " but ", prompts.size(), " sequences were given");
  }
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) return OG_ERROR("sequence ", b, " has no tokens (only padding)");
  }
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  OG_ASSIGN_OR_RETURN(genai::GeneratorParams params, generator_params(options_, std::move(prompts)));
  rows_->processors_made = 0;
  rows_->rows.assign(batch_ * rows_->vocab, 0.0f);
  params.sampling.first_processor = [rows = rows_]() -> std::unique_ptr<LogitProcessor> {
    return std::make_unique<RowProcessor>(rows, rows->processors_made++);
  };
  OG_ASSIGN_OR_RETURN(generator_, genai::Generator::create(*model_, params));
  longest_ = longest;
  next_.clear();
  return Status::ok();
}

Status GeneratorBridge::append_tokens(std::span<const int32_t> ids) {
  if (ids.empty()) return OG_ERROR("no tokens");
  if (ids.size() % batch_ != 0) {
    return OG_ERROR(ids.size(), " tokens do not split into batch_size ", batch_, " rows of equal length");
  }
  const size_t width = ids.size() / batch_;
  std::vector<std::vector<int32_t>> rows;
  for (size_t b = 0; b < batch_; ++b) {
    const std::span<const int32_t> row = ids.subspan(b * width, width);
    rows.push_back(generator_ ? std::vector<int32_t>(row.begin(), row.end())
                              : without_padding(row, model_->info().pad_token_id));
  }
  return append_sequences(rows);
}

Status GeneratorBridge::append_sequences(const std::vector<std::vector<int32_t>>& rows) {
  if (!generator_) return start(rows);
  if (rows.size() != batch_) return OG_ERROR("batch_size is ", batch_, " but ", rows.size(), " sequences were given");
  // genai::Generator appends one token list to every sequence.
  for (size_t b = 1; b < rows.size(); ++b) {
    if (rows[b] != rows[0]) {
      return OG_ERROR("after the first append, every sequence of a batch must get the same tokens (row ", b,
                      " differs from row 0)");
    }
  }
  OG_RETURN_IF_ERROR(drop_lookahead());
  replaced_ = false;
  OG_RETURN_IF_ERROR(generator_->append_tokens(rows[0]));
  longest_ += rows[0].size();
  return Status::ok();
}

// One genai::Generator step with the row processors in `mode`; `picked` gets each sequence's
// token (the pad token for a sequence that had already finished).
Status GeneratorBridge::step(LogitRows::Mode mode, std::vector<int32_t>& picked) {
  if (!generator_) return OG_ERROR("no tokens yet (append_tokens first)");
  const size_t count = sequence_count();
  std::vector<size_t> before(count);
  for (size_t b = 0; b < count; ++b) before[b] = generator_->tokens(b).size();
  if (mode == LogitRows::Mode::kCapture) std::fill(rows_->rows.begin(), rows_->rows.end(), 0.0f);
  rows_->mode = mode;
  const Status status = generator_->generate_next();
  rows_->mode = LogitRows::Mode::kPass;
  OG_RETURN_IF_ERROR(status);
  ++longest_;
  picked.resize(count);
  for (size_t b = 0; b < count; ++b) {
    const std::span<const int32_t> tokens = generator_->tokens(b);
    picked[b] = tokens.size() > before[b] ? tokens.back() : model_->info().pad_token_id;
  }
  return Status::ok();
}

Status GeneratorBridge::generate_next_token() {
  if (lookahead_) {  // the step get_logits ran: now it is the caller's
    lookahead_ = false;
    next_ = ahead_next_;
    return Status::ok();
  }
  const LogitRows::Mode mode = replaced_ ? LogitRows::Mode::kReplace : LogitRows::Mode::kPass;
  replaced_ = false;
  return step(mode, next_);
}

Status GeneratorBridge::check_no_beams(const char* call) const {
  if (options_.num_beams <= 1) return Status::ok();
  return OG_ERROR(call, ": not available with beam search (num_beams ", options_.num_beams,
                  "): the beams' logits are reordered every step");
}

Result<std::span<const float>> GeneratorBridge::logits() {
  OG_RETURN_IF_ERROR(check_no_beams("get_logits"));
  if (!generator_) return OG_ERROR("no tokens yet (append_tokens first)");
  if (!lookahead_ && !replaced_) {
    if (generator_->is_done()) return OG_ERROR("every sequence has finished; there are no next logits");
    visible_.resize(batch_);
    for (size_t b = 0; b < batch_; ++b) visible_[b] = generator_->tokens(b).size();
    OG_RETURN_IF_ERROR(step(LogitRows::Mode::kCapture, ahead_next_));
    lookahead_ = true;
  }
  return std::span<const float>(rows_->rows);
}

Status GeneratorBridge::set_logits(std::span<const float> rows) {
  OG_RETURN_IF_ERROR(check_no_beams("set_logits"));
  if (!generator_) return OG_ERROR("no tokens yet (append_tokens first)");
  if (rows.size() != rows_->rows.size()) {
    return OG_ERROR("logits hold ", rows.size(), " values; batch_size ", batch_, " x vocab_size ", rows_->vocab,
                    " = ", rows_->rows.size(), " expected");
  }
  OG_RETURN_IF_ERROR(drop_lookahead());
  std::copy(rows.begin(), rows.end(), rows_->rows.begin());
  replaced_ = true;
  return Status::ok();
}

Status GeneratorBridge::drop_lookahead() {
  if (!lookahead_) return Status::ok();
  lookahead_ = false;
  --longest_;
  return generator_->rewind(longest_);
}

Status GeneratorBridge::rewind_to(size_t length) {
  if (!generator_) return OG_ERROR("no tokens yet (append_tokens first)");
  OG_RETURN_IF_ERROR(drop_lookahead());
  replaced_ = false;
  OG_RETURN_IF_ERROR(generator_->rewind(length));
  longest_ = length;
  return Status::ok();
}

bool GeneratorBridge::is_done() const {
  // A lookahead only runs while some sequence is unfinished.
  return generator_ && !lookahead_ && generator_->is_done();
}

std::span<const int32_t> GeneratorBridge::sequence(size_t index) const {
  if (!generator_ || index >= sequence_count()) return {};
  const std::span<const int32_t> tokens = generator_->tokens(index);
  return lookahead_ ? tokens.first(std::min(tokens.size(), visible_[index])) : tokens;
}

size_t GeneratorBridge::token_count() const { return lookahead_ ? longest_ - 1 : longest_; }

}  // namespace onnx_genai::capi
