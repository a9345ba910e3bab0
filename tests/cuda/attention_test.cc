// com.microsoft GroupQueryAttention: CUDA kernel against the CPU kernel on random decode and
// prompt cases (ragged seqlens_k, shared and separate past/present, packed and separate QKV, GQA
// ratios, head sizes, rotary variants, softcap, local windows, bias / head sink / smooth softmax,
// f32 / f16 / bf16), decodes split over long caches, short steps (S = 2..16 after a past, short
// prompts), prompts on the flash kernel (S = 17..1024) and the steps it is planned for, timed
// decodes and short steps, and inputs the CUDA kernel rejects.
//
// Shared past/present (the runtime's KV cache) cannot go through the harness's run_on_cuda,
// which gives every output its own buffer: run_gqa below passes the past buffers as present on
// both sides and reads them back as the present outputs.
#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "cuda_test_util.h"
#include "ops/cuda/attention_kernels.h"
#include "ops/schema/attention.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

struct GqaCase {
  DType dtype = DType::kF16;
  int64_t batch = 3, q_len = 1, num_heads = 8, kv_heads = 4, head_size = 64;
  int64_t total_len = 1;  // total_sequence_length
  int64_t past_len = 0;   // 0: no past inputs
  std::vector<int32_t> seqlens;
  bool packed = false;
  bool shared = false;       // present outputs are the past buffers
  bool present = true;       // present outputs requested
  bool empty_new_kv = false; // key / value with 0 rows (attend to the past only)
  bool rotary = false, interleaved = false, position_ids = false;
  int64_t rotary_dim = 0;  // 0: head_size
  float scale = 0.0f, softcap = 0.0f;
  int64_t window = -1;
  bool causal = true, smooth = false, sink = false, bias = false;

  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + " B" + std::to_string(batch) + " S" + std::to_string(q_len) + " N" +
                    std::to_string(num_heads) + "/" + std::to_string(kv_heads) + " D" + std::to_string(head_size) + " total " +
                    std::to_string(total_len) + " past " + std::to_string(past_len) + " seqlens";
    for (int32_t v : seqlens) s += " " + std::to_string(v);
    if (packed) s += " packed";
    if (shared) s += " shared";
    if (!present) s += " no-present";
    if (empty_new_kv) s += " empty-kv";
    if (rotary) s += std::string(" rotary") + (interleaved ? "-interleaved" : "") + " dim " + std::to_string(rotary_dim);
    if (position_ids) s += " position_ids";
    if (scale != 0.0f) s += " scale " + std::to_string(scale);
    if (softcap != 0.0f) s += " softcap " + std::to_string(softcap);
    if (window >= 0) s += " window " + std::to_string(window);
    if (!causal) s += " non-causal";
    if (smooth) s += " smooth";
    if (sink) s += " sink";
    if (bias) s += " bias";
    return s;
  }
};

Tensor int_tensor(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::allocate(dtype, std::move(shape)).value();
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI32) t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    else t.data<int64_t>()[i] = values[i];
  }
  return t;
}

// The node and its inputs (undefined tensors for omitted optional inputs).
std::vector<Tensor> make_inputs(const GqaCase& c, CudaNode& spec, std::mt19937& rng) {
  const int64_t d = c.head_size, kv_len = c.empty_new_kv ? 0 : c.q_len;
  spec.attr_int("num_heads", c.num_heads).attr_int("kv_num_heads", c.kv_heads);
  if (c.rotary) spec.attr_int("do_rotary", 1).attr_int("rotary_interleaved", c.interleaved ? 1 : 0);
  if (c.scale != 0.0f) spec.attr_float("scale", c.scale);
  if (c.softcap != 0.0f) spec.attr_float("softcap", c.softcap);
  if (c.window >= 0) spec.attr_int("local_window_size", c.window);
  if (!c.causal) spec.attr_int("causal", 0);
  if (c.smooth) spec.attr_int("smooth_softmax", 1);

  std::vector<Tensor> in(12);
  const int64_t q_heads = c.packed ? c.num_heads + 2 * c.kv_heads : c.num_heads;
  in[GqaParams::kQuery] = random_float_tensor(c.dtype, Shape{c.batch, c.q_len, q_heads * d}, rng, -3.0f, 3.0f);
  if (!c.packed) {
    in[GqaParams::kKey] = random_float_tensor(c.dtype, Shape{c.batch, kv_len, c.kv_heads * d}, rng);
    in[GqaParams::kValue] = random_float_tensor(c.dtype, Shape{c.batch, kv_len, c.kv_heads * d}, rng);
  }
  if (c.past_len > 0) {
    in[GqaParams::kPastKey] = random_float_tensor(c.dtype, Shape{c.batch, c.kv_heads, c.past_len, d}, rng);
    in[GqaParams::kPastValue] = random_float_tensor(c.dtype, Shape{c.batch, c.kv_heads, c.past_len, d}, rng);
  }
  in[GqaParams::kSeqlensK] = int_tensor(DType::kI32, Shape{c.batch}, std::vector<int64_t>(c.seqlens.begin(), c.seqlens.end()));
  in[GqaParams::kTotalSequenceLength] = int_tensor(DType::kI32, Shape{1}, {c.total_len});
  if (c.rotary) {
    const int64_t half = (c.rotary_dim > 0 ? c.rotary_dim : d) / 2;
    const int64_t positions = std::max(c.total_len, c.past_len) + 8;
    in[GqaParams::kCosCache] = random_float_tensor(c.dtype, Shape{positions, half}, rng);
    in[GqaParams::kSinCache] = random_float_tensor(c.dtype, Shape{positions, half}, rng);
    if (c.position_ids) {
      // Each row continues after its own past, shifted by a few positions (any in range).
      std::vector<int64_t> ids;
      for (int64_t b = 0; b < c.batch; ++b) {
        const int64_t start = std::uniform_int_distribution<int64_t>(0, positions - c.q_len)(rng);
        for (int64_t s = 0; s < c.q_len; ++s) ids.push_back(start + s);
      }
      in[GqaParams::kPositionIds] = int_tensor(DType::kI64, Shape{c.batch, c.q_len}, ids);
    }
  }
  if (c.bias) in[GqaParams::kAttentionBias] = random_float_tensor(c.dtype, Shape{c.batch, 1, c.q_len, c.total_len}, rng, -2.0f, 2.0f);
  if (c.sink) in[GqaParams::kHeadSink] = random_float_tensor(c.dtype, Shape{c.num_heads}, rng);
  while (!in.back().defined()) in.pop_back();
  return in;
}

struct TimedRuns {
  int runs = 0;    // replays per timed batch
  int caches = 1;  // copies of the shared KV cache the replays rotate over (caches > 1: not L2-resident)
  double us_per_run = 0;  // the median batch's
};

constexpr int kTimedBatches = 5;
constexpr float kWarmUpMs = 20.0f;  // of replays before timing: the clocks come up from idle

// Device memory of at least 16 bytes (key / value may hold no rows).
Result<cuda::DeviceBuffer> device_copy(const Tensor& t, const cuda::Stream& stream) {
  const auto bytes = static_cast<size_t>(t.nbytes());
  OG_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 16)));
  if (bytes > 0) OG_RETURN_IF_ERROR(cuda::copy_to_device(buffer.data(), t.raw(), bytes, stream.handle()));
  return buffer;
}

// Times the kernel on `ctx` and on timed.caches - 1 copies of its shared KV cache (past = present),
// so that successive runs read different memory, as the layers of a model do.
Status time_rotating_caches(const OpKernel& kernel, const KernelContext& ctx, bool shared, const cuda::Stream& stream,
                            TimedRuns& timed) {
  const int copies = shared ? timed.caches - 1 : 0;
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<std::vector<KernelTensor>> ins(static_cast<size_t>(copies)), outs(static_cast<size_t>(copies));
  std::vector<KernelContext> ctxs{ctx};
  for (int c = 0; c < copies; ++c) {
    auto& in = ins[static_cast<size_t>(c)];
    auto& out = outs[static_cast<size_t>(c)];
    in.assign(ctx.inputs.begin(), ctx.inputs.end());
    out.assign(ctx.outputs.begin(), ctx.outputs.end());
    for (int i : {GqaParams::kPastKey, GqaParams::kPastValue}) {
      KernelTensor& t = in[static_cast<size_t>(i)];
      const auto bytes = static_cast<size_t>(dtype_storage_bytes(t.dtype, t.numel()));
      OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
      OG_RETURN_IF_ERROR(cuda::cuda_status(cudaMemcpyAsync(buffers.back().data(), t.data, bytes, cudaMemcpyDeviceToDevice,
                                                           static_cast<cudaStream_t>(stream.handle())),
                                           "copy of the KV cache"));
      t.data = buffers.back().data();
      out[static_cast<size_t>(i - GqaParams::kPastKey + 1)].data = t.data;
    }
    ctxs.push_back(KernelContext{in, out, ctx.workspace, nullptr, ctx.stream});
  }
  // One run per context in one graph, after a warm-up the median of kTimedBatches batches: the
  // kernel's time without host launch overhead (a decode step rewrites the same rows, so the
  // replays leave the outputs the test compares).
  const auto run_all = [&]() -> Status {
    for (const KernelContext& c : ctxs) OG_RETURN_IF_ERROR(kernel.run(c));
    return Status::ok();
  };
  OG_ASSIGN_OR_RETURN(const double us, replay_microseconds(stream, run_all, timed.runs, kTimedBatches, kWarmUpMs));
  timed.us_per_run = us / static_cast<double>(ctxs.size());
  return stream.synchronize();
}

// Runs the node on the CPU (stream null) or the GPU; with `shared`, present_key / present_value
// are the past buffers (returned as outputs 1 and 2). `timed` repeats the GPU run and times it.
Result<std::vector<Tensor>> run_gqa(const Node& node, const std::vector<Tensor>& inputs, bool shared,
                                    const cuda::Stream* stream, TimedRuns* timed = nullptr) {
  const DeviceType device = stream != nullptr ? DeviceType::kCuda : DeviceType::kCpu;
  OG_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(node, inputs, device));
  OG_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocate_host_outputs(prepared));
  std::vector<Tensor> host_in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    OG_ASSIGN_OR_RETURN(host_in[i], inputs[i].clone());  // the run may write the past buffers
  }
  std::vector<cuda::DeviceBuffer> buffers;
  buffers.reserve(inputs.size() + outputs.size() + 1);
  std::vector<KernelTensor> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    void* data = host_in[i].raw();
    if (stream != nullptr) {
      OG_ASSIGN_OR_RETURN(buffers.emplace_back(), device_copy(host_in[i], *stream));
      data = buffers.back().data();
    }
    in[i] = {inputs[i].dtype(), &inputs[i].shape(), data};
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    void* data = outputs[i].raw();
    if (shared && i > 0) {
      data = in[GqaParams::kPastKey + i - 1].data;
    } else if (stream != nullptr) {
      const auto bytes = static_cast<size_t>(outputs[i].nbytes());
      OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
      OG_RETURN_IF_ERROR(cuda::fill_bytes(buffers.back().data(), 0xFF, bytes, stream->handle()));
      data = buffers.back().data();
    }
    out[i] = {outputs[i].dtype(), &outputs[i].shape(), data};
  }
  std::vector<float> host_workspace;
  void* workspace = nullptr;
  if (prepared.workspace_bytes > 0 && stream != nullptr) {
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(prepared.workspace_bytes));
    workspace = buffers.back().data();
  } else if (prepared.workspace_bytes > 0) {
    host_workspace.resize(prepared.workspace_bytes / sizeof(float) + 16);
    workspace = host_workspace.data() + (16 - reinterpret_cast<uintptr_t>(host_workspace.data()) % 64 / sizeof(float)) % 16;
  }
  KernelContext ctx{in, out, workspace, nullptr, stream != nullptr ? stream->handle() : nullptr};
  OG_RETURN_IF_ERROR(prepared.kernel->run(ctx));
  if (stream == nullptr) {
    for (size_t i = 1; shared && i < outputs.size(); ++i) outputs[i] = host_in[GqaParams::kPastKey + i - 1];
    return outputs;
  }
  if (timed != nullptr && timed->runs > 0) OG_RETURN_IF_ERROR(time_rotating_caches(*prepared.kernel, ctx, shared, *stream, *timed));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    OG_RETURN_IF_ERROR(cuda::copy_to_host(outputs[i].raw(), out[i].data, static_cast<size_t>(outputs[i].nbytes()), stream->handle()));
  }
  OG_RETURN_IF_ERROR(stream->synchronize());
  return outputs;
}

class GroupQueryAttentionCuda : public CudaKernelTest {
 protected:
  void check(const GqaCase& c, TimedRuns* timed = nullptr) {
    CudaNode spec("GroupQueryAttention", "com.microsoft", {true, c.present, c.present});
    const std::vector<Tensor> inputs = make_inputs(c, spec, rng_);
    const Node& node = spec.with_inputs(inputs);
    const std::string what = "GroupQueryAttention " + c.describe();
    Result<std::vector<Tensor>> cpu = run_gqa(node, inputs, c.shared, nullptr);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    Result<std::vector<Tensor>> gpu = run_gqa(node, inputs, c.shared, &*stream_, timed);
    ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
    for (size_t i = 0; i < cpu->size(); ++i) {
      if (!(*cpu)[i].defined()) continue;
      const double err = expect_close((*gpu)[i], (*cpu)[i], tolerance_for(c.dtype), what + " output " + std::to_string(i));
      double& worst = worst_[dtype_name(c.dtype)];
      worst = std::max(worst, err);
    }
  }

  int64_t pick(std::initializer_list<int64_t> values) { return values.begin()[rng_() % values.size()]; }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // Rotary off, rotate-half, interleaved, partial (half the head), by trial.
  void set_rotary(GqaCase& c, int trial) {
    const int mode = trial % 4;
    c.rotary = mode != 0;
    c.interleaved = mode == 2;
    c.rotary_dim = mode == 3 ? c.head_size / 2 : 0;
    c.position_ids = c.rotary && trial % 3 == 1;
  }
};

// Decode (S = 1): batch 3 with ragged lengths, GQA ratios 1 / 2 / 7, head sizes 64 / 80 / 128,
// shared and separate caches (capacity above the total), packed and separate QKV.
TEST_F(GroupQueryAttentionCuda, DecodeMatchesCpu) {
  for (int trial = 0; trial < 48; ++trial) {
    GqaCase c;
    c.dtype = kDtypes[trial % 3];
    c.kv_heads = pick({1, 2, 3});
    c.num_heads = c.kv_heads * pick({1, 2, 7});
    c.head_size = pick({64, 80, 128});
    c.shared = trial % 2 == 0;
    c.packed = trial / 2 % 2 == 1;
    set_rotary(c, trial / 4);
    c.softcap = trial % 5 == 3 ? 1.0f : 0.0f;
    c.window = trial % 6 == 4 ? uniform(1, 40) : -1;
    c.scale = trial % 7 == 5 ? 0.2f : 0.0f;
    c.total_len = uniform(8, 400);
    const int64_t capacity = c.total_len + uniform(0, 70);
    // Shared: one buffer of the capacity; separate: a past of total - 1 rows or of the capacity.
    c.past_len = c.shared || trial % 3 == 0 ? capacity : c.total_len - 1;
    const int64_t present_len = std::max(c.total_len, c.past_len);
    const int64_t longest = std::min(present_len, c.past_len + 1);
    c.seqlens = {static_cast<int32_t>(longest - 1), static_cast<int32_t>(uniform(0, longest - 1)),
                 static_cast<int32_t>(uniform(0, longest - 1))};
    check(c);
  }
}

// Prompts: first prompts (positions from 0, right padding in a batch of 3, optionally into a
// past buffer) and continued prompts (chunked prefill: batch 1 after a past).
TEST_F(GroupQueryAttentionCuda, PromptMatchesCpu) {
  for (int trial = 0; trial < 36; ++trial) {
    GqaCase c;
    c.dtype = kDtypes[trial % 3];
    c.kv_heads = pick({1, 2});
    c.num_heads = c.kv_heads * pick({1, 2, 7});
    c.head_size = pick({64, 80, 128});
    c.packed = trial % 4 >= 2;
    set_rotary(c, trial / 3);
    c.softcap = trial % 5 == 2 ? 1.0f : 0.0f;
    const bool first = trial % 2 == 0;
    if (first) {
      c.q_len = c.total_len = uniform(2, 90);
      c.causal = trial % 7 != 4;
      c.window = c.causal && trial % 6 == 2 ? uniform(1, 20) : -1;
      c.shared = trial % 3 == 0;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : 0;
      c.seqlens = {static_cast<int32_t>(c.q_len - 1), static_cast<int32_t>(uniform(0, c.q_len - 1)),
                   static_cast<int32_t>(uniform(0, c.q_len - 1))};
    } else {
      c.batch = 1;
      c.q_len = uniform(2, 70);
      const int64_t past = uniform(1, 150);
      c.total_len = past + c.q_len;
      c.window = trial % 6 == 3 ? uniform(1, 60) : -1;
      c.shared = trial % 3 != 2;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : past;
      c.seqlens = {static_cast<int32_t>(c.total_len - 1)};
    }
    check(c);
  }
}

// attention_bias, head_sink, smooth_softmax, key / value without rows (attend to the past only),
// no present outputs (the cache lives in the workspace).
TEST_F(GroupQueryAttentionCuda, OptionalInputsMatchCpu) {
  for (int trial = 0; trial < 24; ++trial) {
    GqaCase c;
    c.dtype = kDtypes[trial % 3];
    c.num_heads = 8;
    c.kv_heads = 2;
    c.head_size = pick({64, 128});
    c.q_len = trial % 2 == 0 ? 1 : uniform(2, 30);
    c.total_len = c.q_len == 1 ? uniform(20, 300) : c.q_len;
    c.bias = trial % 4 < 2;
    c.sink = trial % 3 == 0;
    c.smooth = trial % 3 == 1;
    c.rotary = trial % 5 == 1;
    c.present = trial % 6 != 5;
    c.shared = c.present && trial % 4 == 1;
    c.empty_new_kv = c.q_len == 1 && trial % 8 == 2;
    c.past_len = c.shared || c.empty_new_kv ? c.total_len + uniform(0, 30) : (c.q_len == 1 ? c.total_len - 1 : 0);
    const int64_t longest = c.q_len == 1 ? std::min(c.total_len, c.past_len + (c.empty_new_kv ? 0 : 1)) : c.q_len;
    c.seqlens = {static_cast<int32_t>(longest - 1), static_cast<int32_t>(uniform(0, longest - 1)),
                 static_cast<int32_t>(uniform(0, longest - 1))};
    check(c);
  }
}

// A decode at 4096 keys, batch 3 with ragged lengths: the split over the KV length.
TEST_F(GroupQueryAttentionCuda, LongContextDecodeMatchesCpu) {
  for (DType dtype : kDtypes) {
    GqaCase c;
    c.dtype = dtype;
    c.num_heads = 32;
    c.kv_heads = 8;
    c.head_size = 128;
    c.total_len = c.past_len = 4096;
    c.shared = true;
    c.rotary = true;
    c.seqlens = {4095, 1000, 4000};
    check(c);
  }
}

// Decodes split over a cache far longer than most rows (the runtime's fixed capacity, the mask
// as wide as it): chunks past a row's keys, windows starting inside a chunk, head groups of one
// to two mma tiles (16 query heads each), head sizes 8 / 72 (rounded up to 16) / 192 / 256,
// separate and shared caches, no present outputs, no new key row, bias / softcap / sink / smooth.
TEST_F(GroupQueryAttentionCuda, DecodeOverCapacityMatchesCpu) {
  for (int trial = 0; trial < 30; ++trial) {
    GqaCase c;
    c.dtype = kDtypes[trial % 3];
    c.batch = 2;
    c.kv_heads = pick({1, 2});
    c.num_heads = c.kv_heads * pick({3, 16, 20, 32});
    c.head_size = pick({8, 72, 192, 256});
    c.rotary = trial % 4 == 0;
    c.softcap = trial % 5 == 1 ? 2.0f : 0.0f;
    c.bias = trial % 4 == 2;
    c.sink = trial % 5 == 3;
    c.smooth = trial % 7 == 2;
    c.window = trial % 4 == 1 ? uniform(1, 300) : -1;
    c.present = trial % 7 != 6;
    c.shared = c.present && trial % 2 == 0;
    c.empty_new_kv = trial % 8 == 5;
    c.total_len = uniform(600, 2100);
    c.past_len = c.total_len + (c.shared || c.empty_new_kv ? uniform(0, 100) : 0);
    const int64_t longest = std::min(c.total_len, c.past_len + (c.empty_new_kv ? 0 : 1));
    c.seqlens = {static_cast<int32_t>(uniform(longest - 200, longest - 1)), static_cast<int32_t>(uniform(0, 150))};
    check(c);
  }
}

// f16 decodes (rotary, shared cache), each checked and timed. The replays rotate over copies of
// the cache (128 MB in all where the cache is large, past the 50 MB L2), so K / V come from HBM as
// they do in a model, where every layer has its own cache.
TEST_F(GroupQueryAttentionCuda, DecodeTiming) {
  struct Timing {
    const char* label;
    int64_t batch, heads, kv_heads, head_size, capacity, keys;
  };
  const Timing timings[] = {
      {"f16 B1 N32/8 D128 4096 keys", 1, 32, 8, 128, 4096, 4096},
      {"f16 B1 N32/8 D128 128 keys", 1, 32, 8, 128, 128, 128},
      {"f16 B1 N32/8 D128 capacity 4096, 128 keys", 1, 32, 8, 128, 4096, 128},
      {"f16 B1 N14/2 D64 128 keys", 1, 14, 2, 64, 128, 128},
      {"f16 B1 N14/2 D64 2048 keys", 1, 14, 2, 64, 2048, 2048},
      {"f16 B8 N32/8 D128 2048 keys", 8, 32, 8, 128, 2048, 2048},
  };
  for (const Timing& t : timings) {
    GqaCase c;
    c.batch = t.batch;
    c.num_heads = t.heads;
    c.kv_heads = t.kv_heads;
    c.head_size = t.head_size;
    c.total_len = c.past_len = t.capacity;
    c.shared = true;
    c.rotary = true;
    c.seqlens.assign(static_cast<size_t>(t.batch), static_cast<int32_t>(t.keys - 1));
    const double cache_bytes = 2.0 * t.batch * t.kv_heads * t.capacity * t.head_size * 2;
    const double read_bytes = 2.0 * t.batch * t.kv_heads * t.keys * t.head_size * 2;
    TimedRuns timed{100, static_cast<int>(std::clamp(std::ceil(128e6 / cache_bytes), 1.0, 8.0)), 0};
    check(c, &timed);
    std::printf("  GQA decode %s: %.2f us/run (median of %d x %d CUDA graph replays over %d caches), %.0f GB/s of K/V\n",
                t.label, timed.us_per_run, kTimedBatches, timed.runs, timed.caches, read_bytes / (timed.us_per_run * 1e3));
  }
}

// Short steps after a past (S = 2..16: a speculative-decoding verify; batch 1, as the schema
// requires): the tensor-core kernel's rows, each masked to its causal keys, split over past
// lengths not a multiple of a chunk; GQA groups giving one to several 16-vector slices (and
// partial ones), head sizes 8 / 64 / 80 / 128 / 256 (256 at S >= 14 falls back to the prompt
// kernel), shared caches with spare capacity (the runtime's), separate pasts, packed QKV, rotary
// variants, softcap / window / scale, no new rows; f32 runs the prompt kernel.
TEST_F(GroupQueryAttentionCuda, ShortStepMatchesCpu) {
  constexpr DType kHalfTypes[] = {DType::kF16, DType::kBF16};
  for (int trial = 0; trial < 60; ++trial) {
    GqaCase c;
    c.dtype = trial % 10 == 9 ? DType::kF32 : kHalfTypes[trial % 2];
    c.batch = 1;
    c.q_len = uniform(2, 16);
    c.kv_heads = pick({1, 2, 4, 8});
    c.num_heads = c.kv_heads * pick({1, 2, 4, 7});
    c.head_size = pick({8, 64, 80, 128, 128, 256});
    c.shared = trial % 3 != 2;
    c.packed = trial / 3 % 2 == 1;
    set_rotary(c, trial / 2);
    c.softcap = trial % 5 == 3 ? 1.0f : 0.0f;
    c.window = trial % 6 == 4 ? uniform(1, 300) : -1;
    c.scale = trial % 7 == 5 ? 0.2f : 0.0f;
    c.empty_new_kv = c.shared && !c.packed && trial % 8 == 6;
    const int64_t past = trial % 4 == 0 ? uniform(1, 60) : uniform(60, 3000);
    c.total_len = past + c.q_len;
    // Shared (or no new rows): one buffer of a capacity at least the total; separate: the past rows
    // only, or a buffer of the capacity.
    const int64_t capacity = c.total_len + uniform(0, 100);
    c.past_len = c.shared || c.empty_new_kv || trial % 4 == 1 ? capacity : past;
    c.seqlens = {static_cast<int32_t>(c.total_len - 1)};
    check(c);
  }
}

// Short first prompts (S = total = 2..16) in a batch of 3 with right padding: rows of different
// lengths, new rows appended at 0 (the padding ones too), shared caches or none, causal and not,
// windows; and short steps with attention_bias, head_sink, smooth_softmax, no present outputs.
TEST_F(GroupQueryAttentionCuda, ShortPromptAndOptionalInputsMatchCpu) {
  for (int trial = 0; trial < 40; ++trial) {
    GqaCase c;
    c.dtype = trial % 2 == 0 ? DType::kF16 : DType::kBF16;
    c.kv_heads = pick({1, 2});
    c.num_heads = c.kv_heads * pick({1, 3, 8});
    c.head_size = pick({64, 128});
    c.q_len = uniform(2, 16);
    c.rotary = trial % 3 == 1;
    c.position_ids = c.rotary && trial % 4 == 1;
    c.packed = trial % 5 == 2;
    c.bias = trial % 4 < 2;
    c.sink = trial % 3 == 0;
    c.smooth = trial % 3 == 1;
    c.present = trial % 6 != 5;
    if (trial % 2 == 0) {
      c.total_len = c.q_len;
      c.causal = trial % 8 != 4;
      c.window = c.causal && trial % 5 == 3 ? uniform(1, 8) : -1;
      c.shared = c.present && trial % 4 == 0;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : 0;
      c.seqlens = {static_cast<int32_t>(c.q_len - 1), static_cast<int32_t>(uniform(0, c.q_len - 1)),
                   static_cast<int32_t>(uniform(0, c.q_len - 1))};
    } else {
      c.batch = 1;
      c.total_len = uniform(1, 600) + c.q_len;
      c.shared = c.present && trial % 4 == 1;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : c.total_len - c.q_len;
      c.seqlens = {static_cast<int32_t>(c.total_len - 1)};
    }
    check(c);
  }
}

// Short steps over long caches: the split merged in a cluster (N32/8, S 8: 16 units) and through
// the combine kernel (S 16: 4 slices a KV head, 32 units), a row far shorter than the capacity.
TEST_F(GroupQueryAttentionCuda, LongContextShortStepMatchesCpu) {
  struct Long {
    int64_t q_len, keys, capacity;
  };
  for (const Long& l : {Long{8, 4096, 4096}, Long{16, 2000, 2048}, Long{5, 300, 4096}, Long{11, 3001, 3001}}) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      GqaCase c;
      c.dtype = dtype;
      c.batch = 1;
      c.num_heads = 32;
      c.kv_heads = 8;
      c.head_size = 128;
      c.q_len = l.q_len;
      c.total_len = l.keys;
      c.past_len = l.capacity;
      c.shared = true;
      c.rotary = true;
      c.seqlens = {static_cast<int32_t>(l.keys - 1)};
      check(c);
    }
  }
}

// An 8-token step (a speculative-decoding verify) against the 1-token decode, f16 N32/8 D128 B1,
// shared cache, rotary: one run prints both and their ratio. S 16 is the kernel's longest step;
// S 17 runs on the flash prompt kernel (every S > 1 step ran on the tiled one before).
TEST_F(GroupQueryAttentionCuda, ShortStepTiming) {
  for (int64_t keys : {128, 4096}) {
    double decode_us = 0;
    for (int64_t q_len : {1, 8, 16, 17}) {
      GqaCase c;
      c.batch = 1;
      c.num_heads = 32;
      c.kv_heads = 8;
      c.head_size = 128;
      c.q_len = q_len;
      c.total_len = c.past_len = keys;
      c.shared = true;
      c.rotary = true;
      c.seqlens = {static_cast<int32_t>(keys - 1)};
      const double cache_bytes = 2.0 * c.kv_heads * keys * c.head_size * 2;
      TimedRuns timed{100, static_cast<int>(std::clamp(std::ceil(128e6 / cache_bytes), 1.0, 8.0)), 0};
      check(c, &timed);
      if (q_len == 1) decode_us = timed.us_per_run;
      std::printf("  GQA step f16 B1 N32/8 D128 %lld keys, S %lld: %.2f us/run (%.2fx the S 1 decode)\n",
                  static_cast<long long>(keys), static_cast<long long>(q_len), timed.us_per_run, timed.us_per_run / decode_us);
    }
  }
}

// First prompts on the flash kernel (f16 / bf16, S > 16, head sizes up to 128): 17 to 1024 rows
// (one row tile to 16, and ends inside a tile), GQA ratios 1 / 4 / 7 and the 7B shape (N32/8),
// head sizes 64 / 128 and 72 / 80 (72 padded to whole mma K steps), rotary variants, packed QKV,
// shared caches with spare capacity.
TEST_F(GroupQueryAttentionCuda, FlashPromptMatchesCpu) {
  struct Flash {
    int64_t q_len, kv_heads, ratio, head_size;
  };
  const Flash cases[] = {{17, 2, 1, 64},  {17, 1, 7, 128},  {64, 2, 4, 128},  {64, 1, 7, 64},   {100, 2, 4, 64},
                         {100, 1, 1, 128}, {130, 2, 2, 80},  {200, 1, 4, 72},  {512, 2, 4, 128}, {512, 1, 7, 64},
                         {512, 8, 4, 128}, {1024, 1, 4, 128}, {1024, 1, 1, 64}};
  int trial = 0;
  for (const Flash& f : cases) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      GqaCase c;
      c.dtype = dtype;
      c.batch = 1;
      c.q_len = c.total_len = f.q_len;
      c.kv_heads = f.kv_heads;
      c.num_heads = f.kv_heads * f.ratio;
      c.head_size = f.head_size;
      c.packed = trial % 3 == 1;
      set_rotary(c, trial);
      c.shared = trial % 4 == 2;
      c.past_len = c.shared ? c.total_len + 24 : 0;
      c.seqlens = {static_cast<int32_t>(c.q_len - 1)};
      check(c);
      ++trial;
    }
  }
}

// The flash kernel's masks and bounds: ragged batches of first prompts (rows past an entry's
// length see all its keys), prompts after a past (a chunked prefill: the diagonal off the tile
// grid), local windows (tiles below the window skipped), non-causal prompts, softcap / smooth
// softmax / head sink, shared and separate caches, no present outputs, position ids.
TEST_F(GroupQueryAttentionCuda, FlashPromptMasksMatchCpu) {
  constexpr DType kHalfTypes[] = {DType::kF16, DType::kBF16};
  for (int trial = 0; trial < 32; ++trial) {
    GqaCase c;
    c.dtype = kHalfTypes[trial % 2];
    c.kv_heads = pick({1, 2});
    c.num_heads = c.kv_heads * pick({1, 4, 7});
    c.head_size = pick({64, 128});
    c.packed = trial % 5 == 3;
    set_rotary(c, trial / 2);
    c.softcap = trial % 7 == 5 ? 1.5f : 0.0f;
    c.smooth = trial % 9 == 4;
    c.sink = trial % 9 == 7;
    c.present = trial % 8 != 6;
    const int kind = trial % 4;  // 0, 1: ragged first prompts (1: windowed); 2, 3: after a past (3: windowed)
    if (kind < 2) {
      c.q_len = c.total_len = pick({17, 64, 100, 300});
      c.causal = trial % 8 != 4;
      c.window = c.causal && kind == 1 ? uniform(1, 150) : -1;
      c.shared = c.present && trial % 3 == 0;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : 0;
      c.seqlens = {static_cast<int32_t>(c.q_len - 1), static_cast<int32_t>(uniform(0, c.q_len - 1)),
                   static_cast<int32_t>(uniform(0, c.q_len - 1))};
    } else {
      c.batch = 1;
      c.q_len = pick({17, 64, 100, 512});
      const int64_t past = uniform(1, 700);
      c.total_len = past + c.q_len;
      c.window = kind == 3 ? uniform(1, 300) : -1;
      c.shared = c.present && trial % 3 != 2;
      c.past_len = c.shared ? c.total_len + uniform(0, 40) : past;
      c.seqlens = {static_cast<int32_t>(c.total_len - 1)};
    }
    check(c);
  }
}

// Which steps plan_gqa gives the flash kernel: f16 / bf16 steps longer than the tensor-core
// decode's with head sizes up to 128; not f32, attention_bias, head size 256, or a plan forced
// onto the tiled kernel (the benchmark's baseline).
TEST_F(GroupQueryAttentionCuda, FlashPromptPlannedWhereSupported) {
  using K = cuda::GqaPromptKernel;
  const auto flash_dims = [](DType dtype, int64_t q_len, int64_t head_size, int64_t bias_keys, K kernel) {
    cuda::GqaArgs a;
    a.dtype = dtype;
    a.batch = 1;
    a.q_len = a.kv_len = a.present_len = q_len;
    a.num_heads = 32;
    a.kv_heads = 8;
    a.head_size = head_size;
    a.first_prompt = true;
    a.scale = 0.125f;
    a.bias_keys = bias_keys;
    a.query_row = a.num_heads * head_size;
    a.new_kv_row = a.kv_heads * head_size;
    a.prompt_kernel = kernel;
    const Status planned = cuda::plan_gqa(a);
    EXPECT_TRUE(planned.is_ok()) << planned.message();
    return a.prompt_dims;
  };
  EXPECT_EQ(flash_dims(DType::kF16, 512, 128, 0, K::kAuto), 128);
  EXPECT_EQ(flash_dims(DType::kBF16, 17, 64, 0, K::kAuto), 64);
  EXPECT_EQ(flash_dims(DType::kF16, 100, 80, 0, K::kAuto), 128);
  EXPECT_EQ(flash_dims(DType::kF16, 16, 128, 0, K::kAuto), 0);  // the tensor-core decode's
  EXPECT_EQ(flash_dims(DType::kF32, 512, 128, 0, K::kAuto), 0);
  EXPECT_EQ(flash_dims(DType::kF16, 512, 256, 0, K::kAuto), 0);
  EXPECT_EQ(flash_dims(DType::kF16, 512, 128, 512, K::kAuto), 0);
  EXPECT_EQ(flash_dims(DType::kF16, 512, 128, 0, K::kTiled), 0);
}

// Inputs the kernels reject: the message names the node.
TEST_F(GroupQueryAttentionCuda, RejectsUnsupportedInputsNamingTheNode) {
  GqaCase c;
  c.total_len = c.past_len = 16;
  c.seqlens = {15, 3, 7};
  {
    CudaNode spec("GroupQueryAttention", "com.microsoft", {true, true, true});
    spec.attr_int("sliding_window_cache", 1);
    const std::vector<Tensor> inputs = make_inputs(c, spec, rng_);
    Result<PreparedNode> prepared = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok());
    EXPECT_NE(prepared.status().message().find("GroupQueryAttention (node 'cuda_test_GroupQueryAttention')"), std::string::npos)
        << prepared.status().message();
  }
  {
    c.head_size = 36;  // not a multiple of 8: no 16-byte rows
    CudaNode spec("GroupQueryAttention", "com.microsoft", {true, true, true});
    const std::vector<Tensor> inputs = make_inputs(c, spec, rng_);
    Result<PreparedNode> prepared = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok());
    const std::string& message = prepared.status().message();
    EXPECT_NE(message.find("GroupQueryAttention (node 'cuda_test_GroupQueryAttention')"), std::string::npos) << message;
    EXPECT_NE(message.find("head size"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace onnx_genai::testing
