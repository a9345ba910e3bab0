// cuda_bench's attention cases (cuda_common.h): GroupQueryAttention prompts of a 7B model's
// attention (N32 / Nkv8, D128, f16, rotary, causal; 512 and 1024 rows first, 512 after 512 cached
// rows) through the op's whole launch sequence (rotary and append, then attention), planned onto
// the tiled kernel and onto the flash kernel; PagedAttention steps of the serving engine (decodes
// of many sequences, a prefill chunk beside them, long contexts; Qwen2.5-0.5B's and 7B's
// attention, blocks of 16 in shuffled order) on the CUDA-core kernel and on the tensor-core one.
// Time, TFLOP/s of the attention products (4 * N * D flops per (row, key) pair the causal mask
// keeps), for paged steps the K / V bytes per second (each KV group's rows read once: the decode
// roofline), and the planned output's difference from the reference kernel's.
#include <cmath>
#include <string>
#include <utility>

#include "cuda_common.h"
#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/paged_attention_kernels.h"
#include "onnx_genai/dtype.h"

namespace onnx_genai {
namespace {

// The row with its timing (or the error), rates from the case's flops and KV bytes, and the
// planned output `y` (null for the reference kernel's row) compared with the reference.
AttentionRow finish_row(AttentionRow row, const Result<double>& ms, double flops, double kv_bytes, const cuda::DeviceBuffer* y,
                        const cuda::DeviceBuffer& reference, size_t outputs, cudaStream_t stream) {
  if (!ms.is_ok()) {
    row.error = ms.status().message();
    std::fprintf(stderr, "cuda_bench: %s %s: %s\n", row.name.c_str(), row.variant, row.error.c_str());
    return row;
  }
  row.us = *ms * 1e3;
  row.tflops = flops / (row.us * 1e-6) / 1e12;
  row.gbs = kv_bytes / (row.us * 1e-6) / 1e9;
  if (y != nullptr) row.difference = relative_difference(*y, reference, outputs, stream);
  return row;
}

// A prompt of q_len rows after `past` cached rows, 7B attention shape (N32 / Nkv8, D128, f16,
// rotary, causal), into the runtime's shared cache (present is the past buffer).
struct PromptCase {
  int64_t q_len, past;
  std::string name() const {
    return "gqa-prompt f16 N32/8 D128 S" + std::to_string(q_len) + " past" + std::to_string(past);
  }
};


cuda::GqaArgs prompt_args(const PromptCase& p) {
  cuda::GqaArgs a;
  a.dtype = DType::kF16;
  a.batch = 1;
  a.q_len = a.kv_len = p.q_len;
  a.num_heads = 32;
  a.kv_heads = 8;
  a.head_size = 128;
  a.past_len = a.present_len = p.past + p.q_len;
  a.first_prompt = p.past == 0;
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_size));
  a.do_rotary = true;
  a.rotary_dim = a.head_size;
  a.rotary_rows = a.present_len;
  a.query_row = a.num_heads * a.head_size;
  a.new_kv_row = a.kv_heads * a.head_size;
  return a;
}

// S = Q K^T and O = P V: 2 * 2 * D flops per head and (row, key) pair the causal mask keeps.
double prompt_flops(const cuda::GqaArgs& a, const PromptCase& p) {
  const double pairs = static_cast<double>(p.q_len) * static_cast<double>(p.past) +
                       static_cast<double>(p.q_len) * static_cast<double>(p.q_len + 1) / 2.0;
  return 4.0 * static_cast<double>(a.num_heads * a.head_size) * pairs;
}

// Times the op's launches for the case on the tiled kernel, then on the flash kernel (checked
// against the tiled output). Replays rewrite the same new cache rows, so both read one cache.
void bench_prompt(const PromptCase& p, cudaStream_t stream, std::mt19937& rng, std::vector<AttentionRow>& rows) {
  const cuda::GqaArgs shape = prompt_args(p);
  const auto random_rows = [&](int64_t count, int64_t width) {
    const std::vector<uint16_t> host = random_f16(static_cast<size_t>(count * width), rng, -1.0f, 1.0f);
    cuda::DeviceBuffer buffer = value_or_exit(cuda::DeviceBuffer::allocate(host.size() * 2));
    BENCH_CHECK(cuda::copy_to_device(buffer.data(), host.data(), host.size() * 2, stream));
    return buffer;
  };
  const cuda::DeviceBuffer query = random_rows(p.q_len, shape.query_row);
  const cuda::DeviceBuffer new_k = random_rows(p.q_len, shape.new_kv_row), new_v = random_rows(p.q_len, shape.new_kv_row);
  const cuda::DeviceBuffer cache_k = random_rows(shape.kv_heads * shape.present_len, shape.head_size);
  const cuda::DeviceBuffer cache_v = random_rows(shape.kv_heads * shape.present_len, shape.head_size);
  const cuda::DeviceBuffer cos = random_rows(shape.rotary_rows, shape.rotary_dim / 2);
  const cuda::DeviceBuffer sin = random_rows(shape.rotary_rows, shape.rotary_dim / 2);
  const int32_t last = static_cast<int32_t>(p.past + p.q_len - 1);
  const cuda::DeviceBuffer seqlens = value_or_exit(cuda::DeviceBuffer::allocate(sizeof(last)));
  BENCH_CHECK(cuda::copy_to_device(seqlens.data(), &last, sizeof(last), stream));
  const size_t outputs = static_cast<size_t>(p.q_len * shape.query_row);
  const cuda::DeviceBuffer reference = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
  const cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
  using Kernel = cuda::GqaPromptKernel;
  for (const auto& [variant, kernel] : {std::pair{"tiled", Kernel::kTiled}, std::pair{"flash", Kernel::kAuto}}) {
    const bool first = kernel == Kernel::kTiled;
    AttentionRow row{p.name(), variant};
    cuda::GqaArgs a = shape;
    a.prompt_kernel = kernel;
    Status planned = cuda::plan_gqa(a);
    if (planned.is_ok() && !first && a.prompt_dims == 0) planned = OG_ERROR("the flash prompt kernel was not planned");
    Result<cuda::DeviceBuffer> workspace =
        planned.is_ok() ? cuda::DeviceBuffer::allocate(std::max<size_t>(a.workspace_bytes, 16)) : Result<cuda::DeviceBuffer>(planned);
    Result<double> ms = 0.0;
    if (!workspace.is_ok()) {
      ms = workspace.status();
    } else {
      a.query = query.data(), a.new_k = new_k.data(), a.new_v = new_v.data();
      a.past_k = a.present_k = cache_k.data();
      a.past_v = a.present_v = cache_v.data();
      a.shared_kv = true;
      a.seqlens_k = static_cast<const int32_t*>(seqlens.data());
      a.cos_cache = cos.data(), a.sin_cache = sin.data();
      a.out = first ? reference.data() : y.data();
      a.workspace = workspace->data();
      ms = replay_ms(stream, [&] { return cuda::launch_gqa(a, stream); });
    }
    rows.push_back(finish_row(row, ms, prompt_flops(a, p), NAN, first ? nullptr : &y, reference, outputs, stream));
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}


// ---- PagedAttention serving steps ----

// One engine step: `decodes` sequences of one new token after `context` positions, and
// `prefill` new tokens of one more sequence (0: none), over a pool of blocks of 16 in shuffled
// order; f16, rotary, causal.
struct PagedCase {
  const char* model;  // "0.5B": N14 / Nkv2, D64; "7B": N28 / Nkv4, D128
  int64_t heads, kv_heads, head_size, decodes, context, prefill;
  std::string name() const {
    std::string n = std::string("paged ") + model + " decode x" + std::to_string(decodes) + " ctx" + std::to_string(context);
    return prefill > 0 ? n + " + prefill " + std::to_string(prefill) : n;
  }
};

// The step's device inputs and the args both kernels share.
struct PagedStep {
  cuda::PagedAttentionArgs shape;
  std::vector<cuda::DeviceBuffer> buffers;  // query, new K, new V, K pool, V pool, tables, starts, lens, cos, sin
  double kv_bytes = 0, flops = 0;           // K / V bytes each KV group reads once; attention products
};

PagedStep paged_step(const PagedCase& p, cudaStream_t stream, std::mt19937& rng) {
  PagedStep step;
  cuda::PagedAttentionArgs& a = step.shape;
  const bool prefill = p.prefill > 0;
  a.dtype = DType::kF16;
  a.sequences = p.decodes + (prefill ? 1 : 0);
  a.tokens = p.decodes + p.prefill;
  a.num_heads = p.heads, a.kv_heads = p.kv_heads, a.head_size = p.head_size;
  a.block_size = 16;
  const int64_t longest = std::max(p.context + 1, p.prefill);
  a.max_blocks = (longest + a.block_size - 1) / a.block_size;
  a.num_blocks = a.sequences * a.max_blocks;
  a.query_row = a.num_heads * a.head_size, a.new_kv_row = a.kv_heads * a.head_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_size));
  a.do_rotary = true, a.rotary_dim = a.head_size, a.rotary_rows = longest;
  std::vector<int32_t> tables(static_cast<size_t>(a.num_blocks)), starts{0}, lens;
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
  std::shuffle(tables.begin(), tables.end(), rng);
  for (int64_t s = 0; s < a.sequences; ++s) {
    const bool decode = s < p.decodes;
    starts.push_back(starts.back() + static_cast<int32_t>(decode ? 1 : p.prefill));
    lens.push_back(static_cast<int32_t>(decode ? p.context + 1 : p.prefill));
    const double keys = decode ? static_cast<double>(p.context + 1) : static_cast<double>(p.prefill);
    const double pairs = decode ? keys : keys * (keys + 1) / 2;
    step.kv_bytes += 2.0 * keys * static_cast<double>(a.kv_heads * a.head_size) * 2.0;
    step.flops += 4.0 * static_cast<double>(a.num_heads * a.head_size) * pairs;
  }
  const auto upload = [&](const void* host, size_t bytes) {
    cuda::DeviceBuffer buffer = value_or_exit(cuda::DeviceBuffer::allocate(bytes));
    BENCH_CHECK(cuda::copy_to_device(buffer.data(), host, bytes, stream));
    step.buffers.push_back(std::move(buffer));
  };
  const auto random_rows = [&](int64_t count, int64_t width) {
    const std::vector<uint16_t> host = random_f16(static_cast<size_t>(count * width), rng, -1.0f, 1.0f);
    upload(host.data(), host.size() * 2);
  };
  random_rows(a.tokens, a.query_row);
  random_rows(a.tokens, a.new_kv_row);
  random_rows(a.tokens, a.new_kv_row);
  random_rows(a.num_blocks * a.block_size, a.new_kv_row);
  random_rows(a.num_blocks * a.block_size, a.new_kv_row);
  upload(tables.data(), tables.size() * 4);
  upload(starts.data(), starts.size() * 4);
  upload(lens.data(), lens.size() * 4);
  random_rows(a.rotary_rows, a.rotary_dim / 2);
  random_rows(a.rotary_rows, a.rotary_dim / 2);
  return step;
}

// Times the step (append + attention) on the CUDA-core kernel, then on the planner's (checked
// against the CUDA-core output). Replays rewrite the same new rows, so both read one pool.
void bench_paged(const PagedCase& p, cudaStream_t stream, std::mt19937& rng, std::vector<AttentionRow>& rows) {
  const PagedStep step = paged_step(p, stream, rng);
  const auto ptr = [&](size_t i) { return step.buffers[i].data(); };
  const size_t outputs = static_cast<size_t>(step.shape.tokens * step.shape.query_row);
  const cuda::DeviceBuffer reference = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
  const cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
  using Kernel = cuda::PagedKernel;
  for (const auto& [variant, kernel] : {std::pair{"cuda-core", Kernel::kCudaCore}, std::pair{"planned", Kernel::kAuto}}) {
    const bool first = kernel == Kernel::kCudaCore;
    AttentionRow row{p.name(), variant};
    cuda::PagedAttentionArgs a = step.shape;
    a.kernel = kernel;
    Status planned = cuda::plan_paged_attention(a);
    if (planned.is_ok() && !first && a.flash_dims == 0) planned = OG_ERROR("the tensor-core kernel was not planned");
    Result<cuda::DeviceBuffer> workspace =
        planned.is_ok() ? cuda::DeviceBuffer::allocate(std::max<size_t>(a.workspace_bytes, 16)) : Result<cuda::DeviceBuffer>(planned);
    Result<double> ms = workspace.status();
    if (workspace.is_ok()) {
      a.query = ptr(0), a.new_k = ptr(1), a.new_v = ptr(2);
      a.key_cache_in = a.key_cache = ptr(3);
      a.value_cache_in = a.value_cache = ptr(4);
      a.block_tables = static_cast<const int32_t*>(ptr(5));
      a.query_starts = static_cast<const int32_t*>(ptr(6));
      a.seq_lens = static_cast<const int32_t*>(ptr(7));
      a.cos_cache = ptr(8), a.sin_cache = ptr(9);
      a.out = first ? reference.data() : y.data();
      a.partials = static_cast<float*>(workspace->data());
      ms = replay_ms(stream, [&] { return cuda::launch_paged_attention(a, stream); });
    }
    rows.push_back(finish_row(row, ms, step.flops, step.kv_bytes, first ? nullptr : &y, reference, outputs, stream));
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

}  // namespace

void bench_attention(const std::string& only, cudaStream_t stream, std::mt19937& rng, std::vector<AttentionRow>& rows) {
  for (const PromptCase prompt : {PromptCase{512, 0}, PromptCase{1024, 0}, PromptCase{512, 512}}) {
    if (prompt.name().find(only) != std::string::npos) bench_prompt(prompt, stream, rng, rows);
  }
  const PagedCase paged[] = {
      {"0.5B", 14, 2, 64, 64, 1024, 0},  {"0.5B", 14, 2, 64, 63, 1024, 1024}, {"0.5B", 14, 2, 64, 0, 0, 2048},
      {"7B", 28, 4, 128, 64, 1024, 0},   {"7B", 28, 4, 128, 8, 4096, 0},      {"7B", 28, 4, 128, 63, 1024, 1024},
      {"7B", 28, 4, 128, 1, 4096, 0},
  };
  for (const PagedCase& p : paged) {
    if (p.name().find(only) != std::string::npos) bench_paged(p, stream, rng, rows);
  }
}

// One line per case: the reference kernel and the planner's side by side (rows come in pairs).
void print_attention(const std::vector<AttentionRow>& rows) {
  if (rows.empty()) return;
  std::printf("\n| attention step (append + attention) | reference | us | TFLOP/s | KV GB/s | planned us | TFLOP/s | "
              "KV GB/s | speed-up | planned vs reference |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i + 1 < rows.size(); i += 2) {
    const AttentionRow &ref = rows[i], &planned = rows[i + 1];
    std::printf("| %s | %s | %.1f | %.1f | %.0f | %.1f | %.1f | %.0f | %.2fx | %.3g |\n", ref.name.c_str(), ref.variant,
                ref.us, ref.tflops, ref.gbs, planned.us, planned.tflops, planned.gbs, ref.us / planned.us,
                planned.difference);
  }
}

}  // namespace onnx_genai
