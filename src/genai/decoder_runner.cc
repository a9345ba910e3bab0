#include "genai/decoder_runner.h"

#include <algorithm>

#include "genai/decoder_inputs.h"
#include "genai/greedy_output.h"

namespace onnx_genai::genai {

DecoderRunner::DecoderRunner(Session& session, const DecoderIo& io, int32_t pad_token_id, bool mask_at_capacity)
    : session_(session), io_(io), pad_token_id_(pad_token_id), mask_at_capacity_(mask_at_capacity),
      inputs_(session.inputs().size()),
      outputs_(session.outputs().size()), present_data_(io.kv.size()) {}

bool DecoderRunner::take_greedy_tokens(bool wanted) {
  greedy_tokens_ = wanted && io_.greedy_tokens_output.has_value() && session_.device().type != DeviceType::kCpu;
  return greedy_tokens_;
}

bool DecoderRunner::take_sampled_tokens(bool wanted, const SamplingParams& params) {
  sampled_tokens_ = wanted && io_.sampled_tokens_output.has_value() && session_.device().type != DeviceType::kCpu;
  sampling_params_ = device_sampling_params(params);
  return sampled_tokens_;
}

namespace {

// Positions of logits per row a run keeps when the graph selects logit rows.
int64_t logit_positions(std::span<const RunRow> rows) {
  int64_t most = 1;
  for (const RunRow& row : rows) most = std::max(most, row.logit_positions);
  return most;
}

}  // namespace

// Whether the logits hold only the last fed position(s) of each row rather than `width`.
bool DecoderRunner::one_position() const {
  const IoInfo& declared = session_.outputs()[io_.logits_output];
  return io_.has(InputRole::kLogitRows) || (declared.rank_known && declared.dims.size() == 3 && declared.dims[1] == 1);
}

bool DecoderRunner::keeps_several_positions() const { return io_.has(InputRole::kLogitRows) || !one_position(); }

// The graph draws from each row's last computed position: with `width` positions, a row that ends
// earlier (ragged prefill without logit rows) needs its logits on the host.
DecoderRunner::TokenSource DecoderRunner::token_source(std::span<const RunRow> rows, int64_t width) const {
  if (greedy_tokens_) return TokenSource::kGreedy;
  if (!sampled_tokens_) return TokenSource::kLogits;
  const bool last_is_fed = one_position();
  for (const RunRow& row : rows) {
    if (row.sampler != nullptr && !last_is_fed && row.fresh != width) return TokenSource::kLogits;
  }
  return TokenSource::kSampled;
}

Status DecoderRunner::run(std::span<const RunRow> rows, size_t first, KvCache& cache, LastPositions& last) {
  int64_t width = 0, total = 0;
  for (const RunRow& row : rows) {
    width = std::max(width, row.fresh);
    total = std::max(total, row.cached + row.fresh);
  }
  if (!io_.shared_buffer && total != cache.length() + width) {
    return OG_ERROR("internal error: a concatenated KV cache of ", cache.length(), " positions cannot take a run of ",
                    width, " new positions reaching ", total);
  }
  OG_RETURN_IF_ERROR(cache.reserve(total));
  const bool continues = cache.length() > 0 && width <= kMaxStepWidthAtCapacity;
  const int64_t mask_width = mask_at_capacity_ && io_.shared_buffer && continues ? cache.capacity() : total;
  const TokenSource source = token_source(rows, width);
  // The graph's draws take each row's next uniform, as the host Sampler would take it (a greedy
  // pick takes none).
  uniforms_.assign(rows.size(), kNoDraw);
  masks_.assign(rows.size(), {});
  const bool greedy = sampling_params_[kSampleTemperature] == 0.0f;
  for (size_t b = 0; b < rows.size() && source == TokenSource::kSampled; ++b) {
    if (rows[b].sampler == nullptr) continue;
    uniforms_[b] = greedy ? 0.0 : rows[b].sampler->next_uniform();
    masks_[b] = rows[b].mask;
  }
  OG_RETURN_IF_ERROR(fill_inputs(rows, width, mask_width));
  bind_cache(cache, first, static_cast<int64_t>(rows.size()), width);
  const int64_t positions = one_position() ? (io_.has(InputRole::kLogitRows) ? logit_positions(rows) : 1) : width;
  for (const RunRow& row : rows) {
    if (row.logit_positions > std::min(positions, row.fresh)) {
      return OG_ERROR("internal error: a run keeps ", positions, " logit positions per row, not the ", row.logit_positions,
                      " asked for of a row fed ", row.fresh, " tokens");
    }
  }
  OG_RETURN_IF_ERROR(bind_logits(static_cast<int64_t>(rows.size()), positions, source));
  OG_RETURN_IF_ERROR(session_.run_into(inputs_, outputs_).with_context("running the decoder"));
  OG_RETURN_IF_ERROR(check_presents(cache));
  OG_RETURN_IF_ERROR(collect(rows, first, width, positions, source, last));
  cache.advance(io_.shared_buffer ? std::max(cache.length(), total) : total);
  return Status::ok();
}

Status DecoderRunner::fill_inputs(std::span<const RunRow> rows, int64_t width, int64_t mask_width) {
  const auto batch = static_cast<int64_t>(rows.size());
  const std::vector<IoInfo>& infos = session_.inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    Tensor& t = inputs_[i];
    switch (io_.roles[i]) {
      case InputRole::kInputIds:
      case InputRole::kPositionIds: {
        const bool ids = io_.roles[i] == InputRole::kInputIds;
        OG_RETURN_IF_ERROR(reuse_tensor(t, infos[i].dtype, Shape{batch, width}));
        for (int64_t b = 0; b < batch; ++b) {
          const RunRow& row = rows[static_cast<size_t>(b)];
          for (int64_t s = 0; s < width; ++s) {
            const int64_t j = row.cached + s;
            const bool real = s < row.fresh && row.slots[static_cast<size_t>(j)] != kPadSlot;
            const int64_t value = ids ? (real ? row.slots[static_cast<size_t>(j)] : pad_token_id_)
                                      : (real ? j - row.lead_pads : 0);
            set_integer(t, b * width + s, value);
          }
        }
        break;
      }
      case InputRole::kAttentionMask:
        OG_RETURN_IF_ERROR(reuse_tensor(t, infos[i].dtype, Shape{batch, mask_width}));
        for (int64_t b = 0; b < batch; ++b) {
          const RunRow& row = rows[static_cast<size_t>(b)];
          for (int64_t j = 0; j < mask_width; ++j) {
            const bool real = j < row.cached + row.fresh && row.slots[static_cast<size_t>(j)] != kPadSlot;
            set_integer(t, b * mask_width + j, real ? 1 : 0);
          }
        }
        break;
      case InputRole::kUseCacheBranch:
        OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kBool, Shape{1}));
        t.data<bool>()[0] = mask_width > width;
        break;
      case InputRole::kLogitRows: {
        // Each row's last fed positions (logit_rows.h), as many per row as the widest asks for.
        const int64_t hidden = io_.logit_rows_width, kept = logit_positions(rows);
        OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kI64, Shape{batch, kept, hidden}));
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t fresh = rows[static_cast<size_t>(b)].fresh;
          for (int64_t r = 0; r < kept; ++r) {
            std::fill_n(t.data<int64_t>() + (b * kept + r) * hidden, hidden, std::max<int64_t>(fresh - kept + r, 0));
          }
        }
        break;
      }
      case InputRole::kPastKv:
        break;  // bind_cache
      case InputRole::kSamplingParams:
      case InputRole::kSamplingUniforms:
        OG_RETURN_IF_ERROR(fill_sampling_input(t, io_.roles[i], sampling_params_, uniforms_, masks_));
        break;
      case InputRole::kSamplingMask:
        OG_RETURN_IF_ERROR(fill_masks(t, io_.vocab_size, masks_));
        break;
      case InputRole::kBlockTables:
      case InputRole::kQueryStarts:
      case InputRole::kSeqLens:
      case InputRole::kPagedCache:
        return OG_ERROR("internal error: a paged decoder is run by the serving engine, not the Generator");
    }
  }
  return Status::ok();
}

void DecoderRunner::bind_cache(const KvCache& cache, size_t first, int64_t rows, int64_t width) {
  for (size_t k = 0; k < io_.kv.size(); ++k) {
    const KvBinding& binding = io_.kv[k];
    inputs_[binding.past_input] = cache.past(k, static_cast<int64_t>(first), rows);
    Tensor present = cache.present(k, static_cast<int64_t>(first), rows, width);
    present_data_[k] = present.raw();
    outputs_[binding.present_output] = std::move(present);
  }
}

// With the graph's tokens the logits are given on the session's device, where run_into writes
// them (reallocating there should the plan's shape differ from this guess), so they never cross to
// the host; otherwise they are left for run_into to place on the host.
Status DecoderRunner::bind_logits(int64_t rows, int64_t positions, TokenSource source) {
  Tensor& logits = outputs_[io_.logits_output];
  if (source == TokenSource::kLogits) {
    if (logits.defined() && logits.device().type != DeviceType::kCpu) logits = Tensor();
    return Status::ok();
  }
  const Shape shape{rows, positions, io_.vocab_size};
  if (logits.defined() && logits.device() == session_.device() && logits.dtype() == io_.logits_dtype &&
      logits.shape() == shape) {
    return Status::ok();
  }
  OG_ASSIGN_OR_RETURN(logits, Tensor::allocate(io_.logits_dtype, shape, session_.allocator()));
  return Status::ok();
}

// run_into keeps an output tensor only when the plan's shape matches it; a present that came back
// elsewhere means the graph does not update the cache the way its I/O declared.
Status DecoderRunner::check_presents(const KvCache& cache) const {
  for (size_t k = 0; k < io_.kv.size(); ++k) {
    const KvBinding& binding = io_.kv[k];
    const Tensor& present = outputs_[binding.present_output];
    if (present.raw() == present_data_[k]) continue;
    const Tensor& past = inputs_[binding.past_input];
    return OG_ERROR("decoder output '", session_.outputs()[binding.present_output].name, "' has shape ",
                    present.shape().to_string(), ", not the ", io_.shared_buffer ? "shared " : "", "KV cache shape ",
                    io_.shared_buffer ? past.shape().to_string() : "of past + new positions",
                    " (past '", session_.inputs()[binding.past_input].name, "' was ", past.shape().to_string(),
                    ", cache capacity ", cache.capacity(), ")");
  }
  return Status::ok();
}

Status DecoderRunner::collect(std::span<const RunRow> rows, size_t first, int64_t width, int64_t kept,
                              TokenSource source, LastPositions& last) const {
  const Tensor& logits = outputs_[io_.logits_output];
  const auto batch = static_cast<int64_t>(rows.size());
  const std::string& name = session_.outputs()[io_.logits_output].name;
  if (logits.rank() != 3 || logits.shape()[0] != batch || logits.shape()[2] != io_.vocab_size ||
      (logits.shape()[1] != width && logits.shape()[1] != kept)) {
    return OG_ERROR("decoder output '", name, "' has shape ", logits.shape().to_string(), ", expected [", batch, ", ",
                    width, " or ", kept, ", ", io_.vocab_size, "]");
  }
  const int64_t positions = logits.shape()[1], vocab = io_.vocab_size;
  const Tensor* greedy = source == TokenSource::kGreedy ? &outputs_[*io_.greedy_tokens_output] : nullptr;
  if (greedy != nullptr && greedy->shape() != Shape{batch, positions}) {
    return OG_ERROR("decoder output '", kGreedyTokensOutput, "' has shape ", greedy->shape().to_string(), ", expected [",
                    batch, ", ", positions, "]");
  }
  const Tensor* sampled = source == TokenSource::kSampled ? &outputs_[*io_.sampled_tokens_output] : nullptr;
  if (sampled != nullptr && sampled->shape() != Shape{batch}) {
    return OG_ERROR("decoder output '", kSampledTokensOutput, "' has shape ", sampled->shape().to_string(), ", expected [",
                    batch, "]");
  }
  // With logit_rows.h's input, a row's kept positions end at its last fed one whatever its length.
  const bool rows_selected = io_.has(InputRole::kLogitRows);
  for (int64_t b = 0; b < batch; ++b) {
    const RunRow& row = rows[static_cast<size_t>(b)];
    if (row.fresh == 0) continue;
    if (positions == 1 && row.fresh != width && !rows_selected) {
      return OG_ERROR("decoder output '", name, "' keeps only the last position, but batch row ", first + b,
                      " ends before it (", row.fresh, " of ", width, " positions)");
    }
    const int64_t end = rows_selected || positions == 1 ? positions : row.fresh;
    const int64_t begin = end - row.logit_positions;
    const size_t slot = first + static_cast<size_t>(b);
    std::optional<int32_t>& token = last.tokens[slot];
    token.reset();
    if (greedy != nullptr) {
      std::vector<int32_t>& each = last.position_tokens[slot];
      each.clear();
      for (int64_t p = begin; p < end; ++p) {
        OG_ASSIGN_OR_RETURN(const int32_t argmax, greedy_token(*greedy, b, p, vocab));
        each.push_back(argmax);
      }
      token = each.back();
      continue;
    }
    if (sampled != nullptr) {
      if (row.sampler != nullptr) {
        OG_ASSIGN_OR_RETURN(token, sampled_token(*sampled, b, vocab));
      }
      continue;  // the logits stay on the device: no token follows this run for the other rows
    }
    read_logit_row(logits, (b * positions + begin) * vocab, (end - begin) * vocab, last.logits[slot]);
  }
  return Status::ok();
}

}  // namespace onnx_genai::genai
