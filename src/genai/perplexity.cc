// Perplexity: each window is one decoder run from an empty KV cache (zero-length past tensors),
// reading the logits of every position that predicts a scored token (only those are computed
// when the graph takes runtime/generation_passes.h's logit rows; else the graph computes all); the scored tokens'
// NLL is summed in double.
#include "genai/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "genai/decoder_inputs.h"
#include "genai/device_sampling.h"
#include "genai/model_parts.h"

namespace onnx_genai::genai {

namespace {

// Long enough that most scored tokens see hundreds of tokens of context, short enough that a
// window's logits ([window, vocab] floats) stay small for large vocabularies.
constexpr int64_t kDefaultWindow = 512;

// Element i of an integer input gets value_of(i).
template <typename ValueOf>
void fill_integers(Tensor& t, ValueOf value_of) {
  for (int64_t i = 0; i < t.numel(); ++i) set_integer(t, i, value_of(i));
}

// Whether the graph declares its logits as [batch, 1, vocab]: only the last position.
bool declares_last_position_only(const IoInfo& logits) {
  return logits.rank_known && logits.dims.size() == 3 && logits.dims[1] == 1;
}

// "[batch_size, 1, 1000]": each dim's symbol, else its size.
std::string declared_shape(const IoInfo& info) {
  std::string text = "[";
  for (size_t d = 0; d < info.dims.size(); ++d) {
    const bool named = d < info.symbols.size() && !info.symbols[d].empty();
    text += (d ? ", " : "") + (named ? info.symbols[d] : std::to_string(info.dims[d]));
  }
  return text + "]";
}

Status last_position_error(const std::string& name, const std::string& shape) {
  return OG_ERROR("decoder output '", name, "' is ", shape,
                  ": it keeps only the last position's logits, and perplexity needs every position's");
}

// Logits of a window's positions: row r of `logits` [1, rows, vocab] is position first_position + r.
struct WindowLogits {
  const Tensor* logits = nullptr;
  int64_t first_position = 0;
};

// Runs a window of tokens through the decoder from position 0 over an empty cache.
class WindowRunner {
 public:
  WindowRunner(Session& session, const DecoderIo& io)
      : session_(session), io_(io), selects_rows_(io.has(InputRole::kLogitRows)),
        inputs_(session.inputs().size()), outputs_(session.outputs().size()) {}

  // Logits at least for positions [first_position, ids.size() - 1), the ones predicting tokens
  // (the last position predicts past the window); valid until the next run.
  Result<WindowLogits> run(std::span<const int32_t> ids, int64_t first_position) {
    const auto n = static_cast<int64_t>(ids.size());
    const WindowLogits wanted{&outputs_[io_.logits_output], selects_rows_ ? first_position : 0};
    const int64_t rows = selects_rows_ ? n - 1 - first_position : n;
    OG_RETURN_IF_ERROR(fill_inputs(ids, wanted.first_position, rows));
    OG_RETURN_IF_ERROR(session_.run_into(inputs_, outputs_).with_context("running the decoder"));
    const Shape& shape = wanted.logits->shape();
    const std::string& name = session_.outputs()[io_.logits_output].name;
    if (!selects_rows_ && shape.rank() == 3 && shape[0] == 1 && shape[1] == 1 && n > 1) {
      return last_position_error(name, shape.to_string());
    }
    if (shape != Shape{1, rows, io_.vocab_size}) {
      return OG_ERROR("decoder output '", name, "' has shape ", shape.to_string(), ", expected [1, ", rows, ", ",
                      io_.vocab_size, "]");
    }
    return wanted;
  }

 private:
  // The window's ids from position 0; logit_rows (when the graph has it) asks for `rows`
  // positions from `first_row`.
  Status fill_inputs(std::span<const int32_t> ids, int64_t first_row, int64_t rows) {
    const auto n = static_cast<int64_t>(ids.size());
    const std::vector<IoInfo>& infos = session_.inputs();
    for (size_t i = 0; i < infos.size(); ++i) {
      Tensor& t = inputs_[i];
      const DType dtype = infos[i].dtype;
      switch (io_.roles[i]) {
        case InputRole::kInputIds:
          OG_RETURN_IF_ERROR(reuse_tensor(t, dtype, Shape{1, n}));
          fill_integers(t, [&](int64_t j) { return ids[static_cast<size_t>(j)]; });
          break;
        case InputRole::kAttentionMask:
          OG_RETURN_IF_ERROR(reuse_tensor(t, dtype, Shape{1, n}));
          fill_integers(t, [](int64_t) { return 1; });
          break;
        case InputRole::kPositionIds:
          OG_RETURN_IF_ERROR(reuse_tensor(t, dtype, Shape{1, n}));
          fill_integers(t, [](int64_t j) { return j; });
          break;
        case InputRole::kUseCacheBranch:
          OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kBool, Shape{1}));
          t.data<bool>()[0] = false;  // no past: the branch that computes without a cache
          break;
        case InputRole::kLogitRows: {
          // Row r asks for position first_row + r, repeated over the hidden size (logit_rows.h).
          const int64_t hidden = io_.logit_rows_width;
          OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kI64, Shape{1, rows, hidden}));
          fill_integers(t, [first_row, hidden](int64_t k) { return first_row + k / hidden; });
          break;
        }
        case InputRole::kPastKv:
          OG_RETURN_IF_ERROR(reuse_tensor(t, dtype, Shape{1, io_.kv_heads, 0, io_.head_size}));
          break;
        case InputRole::kSamplingParams:
        case InputRole::kSamplingUniforms:
          OG_RETURN_IF_ERROR(fill_no_sampling(t, io_.roles[i], 1));  // scores need no token
          break;
        case InputRole::kSamplingMask:
          OG_RETURN_IF_ERROR(fill_masks(t, io_.vocab_size, {}));
          break;
        case InputRole::kBlockTables:
        case InputRole::kQueryStarts:
        case InputRole::kSeqLens:
        case InputRole::kPagedCache:
          return OG_ERROR("perplexity: the model was loaded with a paged KV cache (kv_block_size); load it without");
      }
    }
    return Status::ok();
  }

  Session& session_;
  const DecoderIo& io_;
  const bool selects_rows_;  // the graph computes only the logits rows asked for
  std::vector<Tensor> inputs_;   // reused while the window length stays
  std::vector<Tensor> outputs_;  // logits and presents, reused likewise
};

// Sum over positions j in [first_target - 1, n - 1) of -log softmax(logits at j)[ids[j + 1]], in
// double (log-sum-exp around the row's maximum). Position j's logits are row j - first_position.
template <typename T>
double window_nll(const T* logits, int64_t first_position, int64_t vocab, std::span<const int32_t> ids,
                  int64_t first_target) {
  double total = 0;
  for (auto j = static_cast<size_t>(first_target - 1); j + 1 < ids.size(); ++j) {
    const T* row = logits + (static_cast<int64_t>(j) - first_position) * vocab;
    const auto logit = [row](int64_t v) { return static_cast<double>(static_cast<float>(row[v])); };
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < vocab; ++v) top = std::max(top, logit(v));
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(logit(v) - top);
    total += top + std::log(sum) - logit(ids[j + 1]);
  }
  return total;
}

double logits_nll(const WindowLogits& w, int64_t vocab, std::span<const int32_t> ids, int64_t first_target) {
  const Tensor& t = *w.logits;
  switch (t.dtype()) {
    case DType::kF16: return window_nll(t.data<Float16>(), w.first_position, vocab, ids, first_target);
    case DType::kBF16: return window_nll(t.data<BFloat16>(), w.first_position, vocab, ids, first_target);
    default: return window_nll(t.data<float>(), w.first_position, vocab, ids, first_target);  // f32 (find_logits)
  }
}

Status check_token_ids(std::span<const int32_t> tokens, int64_t vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return OG_ERROR("perplexity: token ", i, " is ", tokens[i], ", outside the vocabulary [0, ", vocab, ")");
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<ScoredWindow> plan_windows(int64_t tokens, int64_t window, int64_t stride) {
  std::vector<ScoredWindow> windows;
  int64_t scored_end = 0;  // tokens before it have been scored (or are the sequence's first)
  for (int64_t begin = 0; scored_end < tokens; begin += stride) {
    const int64_t end = std::min(begin + window, tokens);
    const int64_t first_target = std::max(scored_end, begin + 1);
    if (first_target < end) windows.push_back({begin, end, first_target});
    scored_end = end;
  }
  return windows;
}

Result<PerplexityOptions> resolve_perplexity_options(const Model& model, std::span<const int32_t> tokens,
                                                     const PerplexityOptions& options) {
  const ModelParts& parts = ModelAccess::parts(model);
  if (parts.io.paged) return OG_ERROR("perplexity: the model was loaded with a paged KV cache (kv_block_size); load it without");
  if (parts.ranks) return OG_ERROR("perplexity: not with tensor parallelism (ModelOptions::tensor_parallel); load the model without");
  const int64_t context = parts.info.context_length;
  PerplexityOptions resolved = options;
  if (resolved.window == 0) resolved.window = context > 0 ? std::min(context, kDefaultWindow) : kDefaultWindow;
  if (resolved.window < 2) return OG_ERROR("perplexity: the window must hold at least 2 tokens, got ", resolved.window);
  if (context > 0 && resolved.window > context) {
    return OG_ERROR("perplexity: the window of ", resolved.window, " tokens exceeds the model's context length ",
                    context);
  }
  if (resolved.stride == 0) resolved.stride = resolved.window / 2;
  if (resolved.stride < 1 || resolved.stride > resolved.window) {
    return OG_ERROR("perplexity: the stride must be in [1, window ", resolved.window, "], got ", resolved.stride);
  }
  if (tokens.size() < 2) {
    return OG_ERROR("perplexity: needs at least 2 tokens (one to predict from, one to score), got ", tokens.size());
  }
  OG_RETURN_IF_ERROR(check_token_ids(tokens, parts.io.vocab_size));
  const IoInfo& logits = parts.session->outputs()[parts.io.logits_output];
  if (declares_last_position_only(logits)) {
    return last_position_error(logits.name, "declared " + declared_shape(logits));
  }
  return resolved;
}

Result<PerplexityResult> evaluate_perplexity(const Model& model, std::span<const int32_t> tokens,
                                             const PerplexityOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const ModelParts& parts = ModelAccess::parts(model);
  const auto count = static_cast<int64_t>(tokens.size());
  OG_ASSIGN_OR_RETURN(const PerplexityOptions resolved, resolve_perplexity_options(model, tokens, options));
  PerplexityResult result;
  result.tokens = count;
  result.window = resolved.window;
  result.stride = resolved.stride;
  WindowRunner runner(*parts.session, parts.io);
  for (const ScoredWindow& w : plan_windows(count, resolved.window, resolved.stride)) {
    const auto ids = tokens.subspan(static_cast<size_t>(w.begin), static_cast<size_t>(w.end - w.begin));
    const int64_t first_target = w.first_target - w.begin;  // in the window
    Result<WindowLogits> logits = runner.run(ids, first_target - 1);
    if (!logits.is_ok()) {
      return logits.status().with_context("perplexity: window of tokens [" + std::to_string(w.begin) + ", " +
                                          std::to_string(w.end) + ")");
    }
    result.nll += logits_nll(*logits, parts.io.vocab_size, ids, first_target);
    result.scored += w.end - w.first_target;
    ++result.decoder_runs;
  }
  result.ppl = std::exp(result.nll / static_cast<double>(result.scored));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace onnx_genai::genai
