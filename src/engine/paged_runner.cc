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

PagedRunner::BucketIo& PagedRunner::bucket_io(int64_t tokens) {
  auto [it, added] = buckets_.try_emplace(tokens);
  BucketIo& io = it->second;
  if (added) {
    io.inputs.resize(model_.session->inputs().size());
    io.outputs.resize(model_.session->outputs().size());
    for (size_t k = 0; k < model_.io.kv.size(); ++k) {
      io.inputs[model_.io.kv[k].past_input] = pools_[k];
      io.outputs[model_.io.kv[k].present_output] = pools_[k];
    }
  }
  return io;
}

Result<std::unique_ptr<PagedRunner>> PagedRunner::create(const genai::ModelParts& model, const PagedRunnerLimits& limits) {
  const genai::DecoderIo& io = model.io;
  for (size_t i = 0; i < io.roles.size(); ++i) {
    const InputRole role = io.roles[i];
    if (role == InputRole::kAttentionMask || role == InputRole::kUseCacheBranch || role == InputRole::kPastKv ||
        role == InputRole::kSamplingParams || role == InputRole::kSamplingUniforms) {
      return OG_ERROR("the paged decoder still reads '", model.session->inputs()[i].name,
                      "', which packed rows cannot feed");
    }
  }
  std::unique_ptr<PagedRunner> runner(new PagedRunner(model, limits));
  const Shape pool_shape{limits.num_blocks, limits.block_size, io.kv_heads, io.head_size};
  Allocator& memory = model.session->allocator();
  for (size_t k = 0; k < io.kv.size(); ++k) {
    OG_ASSIGN_OR_RETURN(Tensor pool, Tensor::allocate(io.kv_dtype, pool_shape, memory));
    // Zeroed: a block's unwritten rows are never read, but NaN garbage must not be there to find.
    OG_RETURN_IF_ERROR(memory.zero(pool.raw(), static_cast<size_t>(pool.nbytes())));
    runner->pools_.push_back(std::move(pool));
  }
  return runner;
}

Status PagedRunner::fill_inputs(std::span<const ScheduledRun> runs, int64_t tokens, int64_t logit_rows,
                                std::vector<Tensor>& inputs) {
  const genai::DecoderIo& io = model_.io;
  const std::vector<IoInfo>& infos = model_.session->inputs();
  const int64_t seqs = limits_.max_num_seqs, max_blocks = limits_.max_blocks_per_seq;
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
      case InputRole::kAttentionMask:
      case InputRole::kUseCacheBranch:
      case InputRole::kPastKv:
      case InputRole::kSamplingParams:
      case InputRole::kSamplingUniforms:
        return OG_ERROR("internal error: the paged decoder reads an input packed rows cannot feed");
    }
  }
  return Status::ok();
}

// With argmax on a device session the logits are given on the device, where run_into writes them;
// otherwise run_into puts them on the host.
Status PagedRunner::bind_logits(BucketIo& io, int64_t rows, bool on_device) {
  const genai::DecoderIo& d = model_.io;
  Tensor& logits = io.outputs[d.logits_output];
  if (!on_device) {
    if (logits.defined() && logits.device().type != DeviceType::kCpu) logits = Tensor();
    return Status::ok();
  }
  const Shape shape{1, rows, d.vocab_size};
  if (logits.defined() && logits.device() == model_.session->device() && logits.shape() == shape) return Status::ok();
  OG_ASSIGN_OR_RETURN(logits, Tensor::allocate(d.logits_dtype, shape, model_.session->allocator()));
  return Status::ok();
}

Result<bool> PagedRunner::run(std::span<const ScheduledRun> runs, bool argmax, std::vector<std::vector<float>>& logits,
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
  // Speculative drafts may ask for more rows than there are sequences.
  const int64_t logit_rows = std::min(padded, samples > limits_.max_num_seqs ? bucket(samples, padded) : limits_.max_num_seqs);
  BucketIo& io = bucket_io(padded);
  OG_RETURN_IF_ERROR(fill_inputs(runs, padded, logit_rows, io.inputs));
  const genai::DecoderIo& d = model_.io;
  const bool device_argmax = argmax && d.greedy_tokens_output && model_.session->device().type != DeviceType::kCpu;
  OG_RETURN_IF_ERROR(bind_logits(io, d.has(InputRole::kLogitRows) ? logit_rows : padded, device_argmax));
  OG_RETURN_IF_ERROR(model_.session->run_into(io.inputs, io.outputs).with_context("running the paged decoder"));
  for (size_t k = 0; k < d.kv.size(); ++k) {
    if (io.outputs[d.kv[k].present_output].raw() != pools_[k].raw()) {
      return OG_ERROR("internal error: the paged decoder's cache output '",
                      model_.session->outputs()[d.kv[k].present_output].name, "' did not land in its block pool");
    }
  }
  // Row r of the logits is the r-th sampling run's (logit rows), else position = its last token.
  const bool rows_selected = d.has(InputRole::kLogitRows);
  const Tensor& out = io.outputs[d.logits_output];
  if (device_argmax) {
    tokens.resize(static_cast<size_t>(samples));
  } else {
    logits.resize(static_cast<size_t>(samples));
  }
  int64_t row = 0, end = 0;
  for (const ScheduledRun& run : runs) {
    end += run.count;
    for (int64_t p = end - run.sampled_rows(); p < end; ++p, ++row) {
      const int64_t position = rows_selected ? row : p;
      if (device_argmax) {
        OG_ASSIGN_OR_RETURN(tokens[static_cast<size_t>(row)],
                            genai::greedy_token(io.outputs[*d.greedy_tokens_output], 0, position, d.vocab_size));
      } else {
        genai::read_logit_row(out, position * d.vocab_size, d.vocab_size, logits[static_cast<size_t>(row)]);
      }
    }
  }
  return device_argmax;
}

}  // namespace onnx_genai::engine
