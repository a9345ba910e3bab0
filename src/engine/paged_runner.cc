#include "engine/paged_runner.h"

#include <algorithm>
#include <bit>

#include "genai/decoder_inputs.h"
#include "genai/greedy_output.h"

namespace onnx_genai::engine {

namespace {

using genai::InputRole;

int64_t bucket(int64_t tokens, int64_t cap) {
  const int64_t padded = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(tokens, 1))));
  return std::min(padded, static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(cap))));
}

}  // namespace

int64_t PagedRunner::block_bytes(const genai::DecoderIo& io, int64_t block_size) {
  return static_cast<int64_t>(io.kv.size()) * dtype_storage_bytes(io.kv_dtype, block_size * io.kv_heads * io.head_size);
}

PagedRunner::PagedRunner(const genai::ModelParts& model, const PagedRunnerLimits& limits)
    : model_(model), limits_(limits) {}

PagedRunner::BucketIo& PagedRunner::bucket_io(Rank& rank, int64_t tokens) {
  auto [it, added] = rank.buckets.try_emplace(tokens);
  BucketIo& io = it->second;
  if (added) {
    io.inputs.resize(rank.session->inputs().size());
    io.outputs.resize(rank.session->outputs().size());
    for (size_t k = 0; k < rank.io->kv.size(); ++k) {
      io.inputs[rank.io->kv[k].past_input] = rank.pools[k];
      io.outputs[rank.io->kv[k].present_output] = rank.pools[k];
    }
  }
  return io;
}

Result<std::unique_ptr<PagedRunner>> PagedRunner::create(const genai::ModelParts& model, const PagedRunnerLimits& limits) {
  std::unique_ptr<PagedRunner> runner(new PagedRunner(model, limits));
  const size_t n = model.rank_io.size() + 1;
  for (size_t r = 0; r < n; ++r) {
    Rank rank;
    rank.session = r == 0 ? model.session : &model.ranks->rank(static_cast<int>(r));
    rank.io = r == 0 ? &model.io : &model.rank_io[r - 1];
    const genai::DecoderIo& io = *rank.io;
    for (size_t i = 0; i < io.roles.size(); ++i) {
      const InputRole role = io.roles[i];
      if (role == InputRole::kAttentionMask || role == InputRole::kUseCacheBranch || role == InputRole::kPastKv) {
        return OG_ERROR("the paged decoder still reads '", rank.session->inputs()[i].name,
                        "', which packed rows cannot feed");
      }
      // SampleTokens' other host inputs come late with the masks: the fill must come before their
      // copies to the device, each of which waits for the device.
      if (role == InputRole::kSamplingMask || role == InputRole::kSamplingParams || role == InputRole::kSamplingUniforms) {
        rank.late_inputs.push_back(i);
      }
    }
    const Shape pool_shape{limits.num_blocks, limits.block_size, io.kv_heads, io.head_size};
    Allocator& memory = rank.session->allocator();
    for (size_t k = 0; k < io.kv.size(); ++k) {
      OG_ASSIGN_OR_RETURN(Tensor pool, Tensor::allocate(io.kv_dtype, pool_shape, memory));
      // Zeroed: a block's unwritten rows are never read, but NaN garbage must not be there to find.
      OG_RETURN_IF_ERROR(memory.zero(pool.raw(), static_cast<size_t>(pool.nbytes())));
      rank.pools.push_back(std::move(pool));
    }
    runner->ranks_.push_back(std::move(rank));
  }
  return runner;
}

Status PagedRunner::fill_inputs(const Rank& rank, const Feed& feed, std::vector<Tensor>& inputs) const {
  const genai::DecoderIo& io = *rank.io;
  const std::vector<IoInfo>& infos = rank.session->inputs();
  const std::span<const ScheduledRun> runs = feed.runs;
  const int64_t tokens = feed.tokens, logit_rows = feed.logit_rows;
  const int64_t seqs = sequence_slots(tokens), max_blocks = limits_.max_blocks_per_seq;
  for (size_t i = 0; i < io.roles.size(); ++i) {
    Tensor& t = inputs[i];
    switch (io.roles[i]) {
      case InputRole::kInputIds:
      case InputRole::kPositionIds: {
        const bool ids = io.roles[i] == InputRole::kInputIds;
        OG_RETURN_IF_ERROR(genai::reuse_tensor(t, infos[i].dtype, Shape{1, tokens}));
        int64_t at = 0;
        for (const ScheduledRun& run : runs) {
          for (int64_t j = run.first; j < run.first + run.count; ++j, ++at) {
            genai::set_integer(t, at, ids ? run.request->tokens[static_cast<size_t>(j)] : j);
          }
        }
        for (; at < tokens; ++at) genai::set_integer(t, at, ids ? model_.info.pad_token_id : 0);
        break;
      }
      case InputRole::kLogitRows: {
        const int64_t hidden = io.logit_rows_width;
        OG_RETURN_IF_ERROR(genai::reuse_tensor(t, DType::kI64, Shape{1, logit_rows, hidden}));
        int64_t row = 0, end = 0;
        for (const ScheduledRun& run : runs) {
          end += run.count;
          for (int64_t p = end - run.sampled_rows(); p < end; ++p) std::fill_n(t.data<int64_t>() + row++ * hidden, hidden, p);
        }
        std::fill(t.data<int64_t>() + row * hidden, t.data<int64_t>() + logit_rows * hidden, 0);
        break;
      }
      case InputRole::kBlockTables: {
        // Only each scheduled row's own blocks: attention reads a row's first ceil(len / block)
        // entries and nothing of unused rows (length 0), so the rest may hold anything.
        OG_RETURN_IF_ERROR(genai::reuse_tensor(t, DType::kI32, Shape{seqs, max_blocks}));
        for (size_t s = 0; s < runs.size(); ++s) {
          const std::vector<int32_t>& blocks = runs[s].request->blocks;
          std::copy(blocks.begin(), blocks.end(), t.data<int32_t>() + static_cast<int64_t>(s) * max_blocks);
        }
        break;
      }
      case InputRole::kQueryStarts:
      case InputRole::kSeqLens: {
        const bool starts = io.roles[i] == InputRole::kQueryStarts;
        OG_RETURN_IF_ERROR(genai::reuse_tensor(t, DType::kI32, Shape{starts ? seqs + 1 : seqs}));
        int32_t offset = 0;
        if (starts) t.data<int32_t>()[0] = 0;
        for (int64_t s = 0; s < seqs; ++s) {
          const ScheduledRun* run = s < static_cast<int64_t>(runs.size()) ? &runs[static_cast<size_t>(s)] : nullptr;
          if (starts) {
            offset += run != nullptr ? static_cast<int32_t>(run->count) : 0;
            t.data<int32_t>()[s + 1] = offset;
          } else {
            t.data<int32_t>()[s] = run != nullptr ? static_cast<int32_t>(run->first + run->count) : 0;
          }
        }
        break;
      }
      case InputRole::kPagedCache:
        break;  // bound once, at creation
      case InputRole::kSamplingParams:
      case InputRole::kSamplingUniforms:
      case InputRole::kSamplingMask:
        break;  // fill_draws
      case InputRole::kAttentionMask:
      case InputRole::kUseCacheBranch:
      case InputRole::kPastKv:
        return OG_ERROR("internal error: the paged decoder reads an input packed rows cannot feed");
    }
  }
  return Status::ok();
}

Status PagedRunner::LateMasks::ready() {
  std::call_once(once, [&] {
    if (compute != nullptr && *compute) status = (*compute)();
  });
  return status;
}

Status PagedRunner::fill_masks(const Feed& feed, Tensor& storage) const {
  auto* out = reinterpret_cast<uint64_t*>(storage.data<int64_t>());
  for (const DeviceDraw& draw : *feed.draws) {
    if (!draw.masked) continue;
    if (draw.mask.empty()) return OG_ERROR("internal error: a masked draw's mask was not computed");
    OG_RETURN_IF_ERROR(genai::append_mask(draw.mask, model_.io.vocab_size, out));
  }
  return Status::ok();
}

Status PagedRunner::fill_draws(const Rank& rank, const Feed& feed, BucketIo& bucket) const {
  const genai::DecoderIo& io = *rank.io;
  const int64_t rows = feed.rows;
  const std::span<const int64_t> rows_at = feed.rows_at;
  const std::vector<DeviceDraw>* draws = feed.draws;
  const DeviceDraw none;
  for (size_t i = 0; i < io.roles.size(); ++i) {
    Tensor& t = bucket.inputs[i];
    if (io.roles[i] == InputRole::kSamplingParams) {
      OG_RETURN_IF_ERROR(genai::reuse_tensor(t, DType::kF32, Shape{rows, kSampleParamCount}));
      for (int64_t r = 0; r < rows; ++r) std::copy(none.params.begin(), none.params.end(), t.data<float>() + r * kSampleParamCount);
      int64_t slot = 0;
      for (size_t k = 0; draws != nullptr && k < rows_at.size(); ++k) {
        float* row = t.data<float>() + rows_at[k] * kSampleParamCount;
        std::copy((*draws)[k].params.begin(), (*draws)[k].params.end(), row);
        if ((*draws)[k].masked) row[kSampleMaskSlot] = static_cast<float>(++slot);
      }
    } else if (io.roles[i] == InputRole::kSamplingMask) {
      // A row per logit row once any draw is masked (those after the masked draws' unread), so
      // that a bucket has one masked plan, which warm_up() compiles and records: 1.2 MB at 64
      // rows of a 152k vocabulary, in page-locked memory on a GPU, uploaded after the forward pass.
      const int64_t words = genai::mask_words(model_.io.vocab_size);
      if (!bucket.masks.defined() || bucket.masks.shape()[0] < rows) {
        OG_ASSIGN_OR_RETURN(bucket.masks, Tensor::allocate(DType::kI64, Shape{rows, words}, rank.session->host_allocator()));
      }
      t = Tensor::view(DType::kI64, Shape{feed.masked == 0 ? 0 : rows, words}, bucket.masks.raw());
    } else if (io.roles[i] == InputRole::kSamplingUniforms) {
      OG_RETURN_IF_ERROR(genai::reuse_tensor(t, DType::kF64, Shape{rows}));
      std::fill_n(t.data<double>(), rows, genai::kNoDraw);
      for (size_t k = 0; draws != nullptr && k < rows_at.size(); ++k) t.data<double>()[rows_at[k]] = (*draws)[k].uniform;
    }
  }
  return Status::ok();
}

bool PagedRunner::device_argmax() const {
  return model_.io.greedy_tokens_output.has_value() && model_.session->device().type != DeviceType::kCpu;
}

bool PagedRunner::device_draws() const { return device_argmax() && model_.io.sampled_tokens_output.has_value(); }

bool PagedRunner::device_masks() const { return device_draws() && model_.io.has(InputRole::kSamplingMask); }

// With tokens taken on the device the logits are given there, where run_into writes them;
// otherwise run_into puts them on the host.
Status PagedRunner::bind_logits(const Rank& rank, BucketIo& io, int64_t rows, bool on_device) {
  const genai::DecoderIo& d = *rank.io;
  Tensor& logits = io.outputs[d.logits_output];
  if (!on_device) {
    if (logits.defined() && logits.device().type != DeviceType::kCpu) logits = Tensor();
    return Status::ok();
  }
  const Shape shape{1, rows, d.vocab_size};
  if (logits.defined() && logits.device() == rank.session->device() && logits.shape() == shape) return Status::ok();
  OG_ASSIGN_OR_RETURN(logits, Tensor::allocate(d.logits_dtype, shape, rank.session->allocator()));
  return Status::ok();
}

Result<bool> PagedRunner::run(std::span<const ScheduledRun> runs, const std::vector<DeviceDraw>* draws,
                              const std::function<Status()>& masks_ready, std::vector<std::vector<float>>& logits,
                              std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(runs.size()) > limits_.max_num_seqs) {
    return OG_ERROR("internal error: ", runs.size(), " sequences scheduled, more than max_num_seqs ", limits_.max_num_seqs);
  }
  int64_t fed = 0, samples = 0;
  for (const ScheduledRun& run : runs) {
    fed += run.count;
    samples += run.sampled_rows();
  }
  const int64_t padded = bucket(fed, limits_.max_num_batched_tokens);
  const int64_t rows = logit_rows(padded, samples);
  const genai::DecoderIo& d = model_.io;
  // Row r of the logits is the r-th sampling position (logit rows), else the position itself.
  const bool rows_selected = d.has(InputRole::kLogitRows);
  std::vector<int64_t> rows_at;
  int64_t end = 0;
  for (const ScheduledRun& run : runs) {
    end += run.count;
    for (int64_t p = end - run.sampled_rows(); p < end; ++p) rows_at.push_back(rows_selected ? static_cast<int64_t>(rows_at.size()) : p);
  }
  const bool device_tokens = draws != nullptr;
  if (device_tokens) {
    const bool sampled = std::any_of(draws->begin(), draws->end(), [](const DeviceDraw& w) { return w.uniform != genai::kNoDraw; });
    if (draws->size() != rows_at.size() || !(sampled ? device_draws() : device_argmax())) {
      return OG_ERROR("internal error: ", draws->size(), " device draws for ", rows_at.size(),
                      " sampling positions, or a decoder without the outputs to take them");
    }
  }
  LateMasks masks;
  masks.compute = &masks_ready;
  const int64_t masked =
      draws == nullptr ? 0 : std::count_if(draws->begin(), draws->end(), [](const DeviceDraw& w) { return w.masked; });
  OG_RETURN_IF_ERROR(run_ranks(Feed{runs, padded, rows, rows_selected ? rows : padded, rows_at, draws, &masks, masked}));
  const BucketIo& io = ranks_[0].buckets.at(padded);  // rank 0's logits: all-gathered, the whole vocabulary
  if (!device_tokens) {
    logits.resize(rows_at.size());
    const Tensor& out = io.outputs[d.logits_output];
    for (size_t k = 0; k < rows_at.size(); ++k) genai::read_logit_row(out, rows_at[k] * d.vocab_size, d.vocab_size, logits[k]);
    return false;
  }
  tokens.resize(rows_at.size());
  for (size_t k = 0; k < rows_at.size(); ++k) {
    if ((*draws)[k].uniform == genai::kNoDraw) {
      OG_ASSIGN_OR_RETURN(tokens[k], genai::greedy_token(io.outputs[*d.greedy_tokens_output], 0, rows_at[k], d.vocab_size));
    } else {
      OG_ASSIGN_OR_RETURN(tokens[k], genai::sampled_token(io.outputs[*d.sampled_tokens_output], rows_at[k], d.vocab_size));
    }
  }
  return true;
}

int64_t PagedRunner::logit_rows(int64_t padded, int64_t samples) const {
  // Speculative drafts may ask for more rows than there are sequences.
  return std::min(padded, samples > limits_.max_num_seqs ? bucket(samples, padded) : limits_.max_num_seqs);
}

Result<int64_t> PagedRunner::warm_up() {
  const bool rows_selected = model_.io.has(InputRole::kLogitRows);
  const std::vector<DeviceDraw> no_draws;
  const int64_t largest = bucket(limits_.max_num_batched_tokens, limits_.max_num_batched_tokens);
  int64_t shapes = 0;
  for (int64_t padded = 1; padded <= largest; padded *= 2) {
    const int64_t rows = logit_rows(padded, 1);
    // Logits to the host, tokens on the device, and tokens on the device under token masks
    // (structured output: no row reads them here).
    for (const int way : {0, 1, 2}) {
      if ((way == 1 && !device_argmax()) || (way == 2 && !device_masks())) continue;
      LateMasks none;
      // Twice: a session records a step's CUDA graph when the shape comes again.
      for (int k = 0; k < 2; ++k) {
        OG_RETURN_IF_ERROR(run_ranks(Feed{{}, padded, rows, rows_selected ? rows : padded, {}, way > 0 ? &no_draws : nullptr,
                                          &none, way == 2 ? rows : 0}));
      }
      ++shapes;
    }
  }
  return shapes;
}

Status PagedRunner::run_ranks(const Feed& feed) {
  if (ranks_.size() == 1) return run_rank(0, feed);
  return model_.ranks->run_ranks([&](int r) { return run_rank(static_cast<size_t>(r), feed); });
}

Status PagedRunner::run_rank(size_t r, const Feed& feed) {
  Rank& rank = ranks_[r];
  const genai::DecoderIo& d = *rank.io;
  BucketIo& io = bucket_io(rank, feed.tokens);
  OG_RETURN_IF_ERROR(fill_inputs(rank, feed, io.inputs));
  OG_RETURN_IF_ERROR(fill_draws(rank, feed, io));
  OG_RETURN_IF_ERROR(bind_logits(rank, io, feed.rows, feed.draws != nullptr));
  // The masks come while the forward pass runs.
  LateInputs late;
  if (feed.masked > 0) {
    late.inputs = rank.late_inputs;
    late.fill = [&] {
      OG_RETURN_IF_ERROR(feed.masks->ready());
      return fill_masks(feed, io.masks);
    };
  }
  OG_RETURN_IF_ERROR(rank.session->run_into(io.inputs, io.outputs, late).with_context("running the paged decoder"));
  for (size_t k = 0; k < d.kv.size(); ++k) {
    if (io.outputs[d.kv[k].present_output].raw() != rank.pools[k].raw()) {
      return OG_ERROR("internal error: the paged decoder's cache output '",
                      rank.session->outputs()[d.kv[k].present_output].name, "' did not land in its block pool");
    }
  }
  return Status::ok();
}

}  // namespace onnx_genai::engine
