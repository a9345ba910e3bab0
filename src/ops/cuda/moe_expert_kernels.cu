// The CUDA MoE's expert projections (moe_kernels.h, steps 2 and 3), on CUDA cores.
//
// Memory plan of one launch, grid (expert slot, group of kWarps output pairs):
//   - Slot s takes the s-th active expert (the list the routing kernel wrote; slots past its
//     length exit at once), so the grid is fixed by the shapes and only chosen experts are read.
//   - A warp owns a pair of weight rows (fc1 gate and linear halves, fc1 and fc3, or two
//     neighbouring rows) and all of the expert's routed rows, a tile of MR at a time in
//     registers: each 16-byte chunk of the pair's codes is loaded once per tile (once in all at
//     batch 1), lane l taking chunks l, l + 32, ... two at a time, so a warp's load is 512
//     contiguous bytes of a row, streamed past L1.
//   - A 32-bit word of codes lies in one quantisation block: its scale (and zero point) is loaded
//     once per word or per chunk (L1-resident), the codes become floats in registers (int: the
//     2^23 mantissa trick with the zero point folded into the subtraction, exact; MXFP4: e2m1
//     placed in f16 bits, 2^14 folded into the block scale) and meet MR activation rows read
//     through L1 (every warp of the expert rereads them).
//   - Sums are f32 per word, scaled into the running sums, reduced across the warp by shuffles;
//     lane 0 adds the biases, applies the epilogue and writes f32 by entry (no atomics: each output
//     is written once, so results do not depend on the schedule).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/moe_device.cuh"
#include "ops/cuda/tensor_core_gemv.cuh"

namespace onnx_genai::cuda::moe {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWordsPerChunk = 4;  // a 16-byte chunk
constexpr int kChunkBytes = 16;

using tensor_core_gemv::load_codes;

// What a warp writes from its pair's sums: kAffine both (+ bias); kActivate both through the
// activation; kGate one output, the gated activation of the pair.
enum class Epilogue { kAffine, kActivate, kGate };

// One projection launch.
struct Pass {
  MoEProjection a, b;            // warp w's rows: a's w * row_step, b's that + b_offset
  int64_t row_step = 2, b_offset = 1;
  int64_t warps = 0, k = 0;
  int64_t row_bytes = 0;         // of a weight row, whole chunks
  int block_shift = 0;           // log2 of the quantisation block (blocks are powers of two)
  int param_words_mask = 0;      // words sharing one scale / zero point (1, 2 or 4) minus 1
  int64_t zp_row_bytes = 0;      // int codes per block: packed zero points of one row
  Epilogue epilogue = Epilogue::kAffine;
  // fc2: the routing ended before fc1 passed its wait, so the expert list may be read before this
  // kernel's own wait (and its weights fetched into L2 while fc1 drains).
  bool routing_done = false;
  const void* src = nullptr;     // activations: x [tokens, k] (fc1) or [routed, k] f32 by entry (fc2)
  bool by_token = false;
  float* out = nullptr;          // [routed, out_width] by entry
  int64_t out_width = 0;
};

__device__ __forceinline__ float load_float(const void* p, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// How each weight format's 32-bit words become floats: kPerWord values, in K order.
template <MoEWeights W, typename TW>
struct Format;

template <>
struct Format<MoEWeights::kInt4, uint8_t> {
  static constexpr int kPerWord = 8;
  static constexpr int kBits = 4;
  __device__ static void decode(uint32_t word, float zero, float (&v)[kPerWord]) {
    const float bias = 8388608.0f + zero;  // exact: the code sits in the mantissa of 2^23
#pragma unroll
    for (int j = 0; j < kPerWord; ++j) v[j] = __uint_as_float(0x4B000000u | ((word >> (4 * j)) & 0xFu)) - bias;
  }
};

template <>
struct Format<MoEWeights::kInt8, uint8_t> {
  static constexpr int kPerWord = 4;
  static constexpr int kBits = 8;
  __device__ static void decode(uint32_t word, float zero, float (&v)[kPerWord]) {
    const float bias = 8388608.0f + zero;
#pragma unroll
    for (int j = 0; j < kPerWord; ++j) v[j] = __uint_as_float(__byte_perm(word, 0x4Bu, 0x4550u | static_cast<uint32_t>(j))) - bias;
  }
};

// e2m1 (sign, 2 exponent bits, 1 mantissa bit) as f16 bits: the magnitude bits at 11..9 give the
// value times 2^-14 (subnormals included), which the block scale makes up.
template <>
struct Format<MoEWeights::kMxfp4, uint8_t> {
  static constexpr int kPerWord = 8;
  __device__ static void decode(uint32_t word, float, float (&v)[kPerWord]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t pair = (word >> (4 * i)) & 0x000F000Fu;  // nibbles i and i + 4
      const uint32_t bits = ((pair & 0x00070007u) << 9) | ((pair & 0x00080008u) << 12);
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&bits));
      v[i] = f.x, v[i + 4] = f.y;
    }
  }
};

template <>
struct Format<MoEWeights::kFloat, float> {
  static constexpr int kPerWord = 1;
  __device__ static void decode(uint32_t word, float, float (&v)[kPerWord]) { v[0] = __uint_as_float(word); }
};

template <>
struct Format<MoEWeights::kFloat, __half> {
  static constexpr int kPerWord = 2;
  __device__ static void decode(uint32_t word, float, float (&v)[kPerWord]) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&word));
    v[0] = f.x, v[1] = f.y;
  }
};

template <>
struct Format<MoEWeights::kFloat, __nv_bfloat16> {
  static constexpr int kPerWord = 2;
  __device__ static void decode(uint32_t word, float, float (&v)[kPerWord]) {
    v[0] = __uint_as_float(word << 16), v[1] = __uint_as_float(word & 0xFFFF0000u);
  }
};

// Scale and zero point of the word of row `row` of expert e starting at k (float weights: 1, 0).
template <MoEWeights W, typename TW>
__device__ __forceinline__ void word_params(const MoEArgs& a, const Pass& p, const MoEProjection& proj, int64_t e,
                                            int64_t row, int64_t k, float& scale, float& zero) {
  const int64_t r = e * proj.n + row;
  if constexpr (W == MoEWeights::kMxfp4) {
    const uint8_t s = static_cast<const uint8_t*>(proj.scales)[r * proj.blocks + (k >> p.block_shift)];
    // 2^(s - 127) times the 2^14 the f16 decoding leaves out; 255 is NaN, as on the CPU.
    const float power = s == 0 ? 0x1p-113f : __uint_as_float(static_cast<uint32_t>(s) << 23) * 16384.0f;
    scale = s == 255 ? __int_as_float(0x7fc00000) : power * proj.global_scales[e];
    zero = 0.0f;
  } else if constexpr (W == MoEWeights::kFloat) {
    scale = 1.0f, zero = 0.0f;
  } else {
    constexpr int kBits = Format<W, TW>::kBits;
    const int64_t block = a.per_row ? 0 : k >> p.block_shift;
    scale = load_float(proj.scales, a.per_row ? r : r * proj.blocks + block, a.scale_dtype);
    zero = static_cast<float>(1 << (kBits - 1));
    if (proj.zero_points != nullptr) {
      // Per row: packed along N ([E, ceil(N * bits / 8)]); per block: along the blocks of a row.
      const int64_t at = a.per_row ? e * ((proj.n * kBits + 7) / 8) * 8 + row * kBits : r * p.zp_row_bytes * 8 + block * kBits;
      zero = static_cast<float>((proj.zero_points[at / 8] >> (at % 8)) & ((1 << kBits) - 1));
    }
  }
}

// The pair's sums over one chunk of codes (qa of row a, qb of row b) starting at k0.
template <MoEWeights W, typename TW, typename TA, int MR>
__device__ __forceinline__ void accumulate_chunk(const MoEArgs& a, const Pass& p, int64_t e, int64_t row_a, int64_t row_b,
                                                 int64_t k0, const uint4& qa, const uint4& qb, const TA* const (&src)[MR],
                                                 float (&acc)[2][MR]) {
  using F = Format<W, TW>;
  constexpr int kPerWord = F::kPerWord;
  constexpr int kVec = kPerWord * sizeof(TA) < 16 ? kPerWord : 16 / static_cast<int>(sizeof(TA));
  const uint32_t words_a[kWordsPerChunk] = {qa.x, qa.y, qa.z, qa.w}, words_b[kWordsPerChunk] = {qb.x, qb.y, qb.z, qb.w};
  float scale_a = 1.0f, zero_a = 0.0f, scale_b = 1.0f, zero_b = 0.0f;
#pragma unroll
  for (int i = 0; i < kWordsPerChunk; ++i) {
    const int64_t k = k0 + i * kPerWord;
    if ((i & p.param_words_mask) == 0) {
      word_params<W, TW>(a, p, p.a, e, row_a, k, scale_a, zero_a);
      word_params<W, TW>(a, p, p.b, e, row_b, k, scale_b, zero_b);
    }
    float va[kPerWord], vb[kPerWord];
    F::decode(words_a[i], zero_a, va);
    F::decode(words_b[i], zero_b, vb);
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      float x[kPerWord];
#pragma unroll
      for (int h = 0; h < kPerWord / kVec; ++h) {
        float part[kVec];
        load_floats<TA, kVec>(src[r] + k + h * kVec, part);
#pragma unroll
        for (int j = 0; j < kVec; ++j) x[h * kVec + j] = part[j];
      }
      float dot_a = 0.0f, dot_b = 0.0f;
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) dot_a = fmaf(va[j], x[j], dot_a), dot_b = fmaf(vb[j], x[j], dot_b);
      acc[0][r] = fmaf(scale_a, dot_a, acc[0][r]);
      acc[1][r] = fmaf(scale_b, dot_b, acc[1][r]);
    }
  }
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// ONNX Runtime's MoE activations, as ops/cpu/moe.cc computes them (gelu: the tanh form).
__device__ __forceinline__ float activate(MoEActivation act, float v) {
  switch (act) {
    case MoEActivation::kRelu: return fmaxf(v, 0.0f);
    case MoEActivation::kGelu: return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    case MoEActivation::kSilu: return v * sigmoid(v);
    default: return v;
  }
}

// The gated activation of a pair: SwiGLU (clamped, alpha, beta) or act(gate) * linear (fc3).
__device__ __forceinline__ float gate(const MoEArgs& a, float g, float lin) {
  if (a.activation != MoEActivation::kSwiGLU) return activate(a.activation, g) * lin;
  g = fminf(g, a.limit);
  lin = fminf(fmaxf(lin, -a.limit), a.limit);
  return g * sigmoid(a.alpha * g) * (lin + a.beta);
}

__device__ __forceinline__ float bias_of(const MoEArgs& a, const MoEProjection& proj, int64_t e, int64_t row) {
  return proj.bias != nullptr ? load_float(proj.bias, e * proj.n + row, a.dtype) : 0.0f;
}

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

template <MoEWeights W, typename TW, typename TA, int MR>
__global__ void __launch_bounds__(kThreads) expert_kernel(MoEArgs a, Pass p, Buffers b) {
  constexpr int64_t kPerChunk = Format<W, TW>::kPerWord * kWordsPerChunk;
  if (!p.routing_done) wait_for_prior_grid();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t w = int64_t{blockIdx.y} * kWarps + threadIdx.x / 32;
  const bool live = static_cast<int>(blockIdx.x) < b.active[a.experts] && w < p.warps;
  const int64_t e = live ? b.active[blockIdx.x] : 0;
  const int64_t row_a = live ? w * p.row_step : 0;
  // An odd row count leaves the last pair of neighbouring rows one row: it reads row a twice and
  // writes once.
  const bool has_b = row_a + p.b_offset < p.b.n;
  const int64_t row_b = has_b ? row_a + p.b_offset : row_a;
  const uint8_t* codes_a = static_cast<const uint8_t*>(p.a.weights) + (e * p.a.n + row_a) * p.row_bytes;
  const uint8_t* codes_b = static_cast<const uint8_t*>(has_b ? p.b.weights : p.a.weights) +
                           (e * (has_b ? p.b.n : p.a.n) + row_b) * p.row_bytes;
  const int64_t chunks = p.row_bytes / kChunkBytes;
  if (live && p.routing_done) {
    for (int64_t c = lane; c < chunks; c += 32) prefetch_l2(codes_a + c * kChunkBytes), prefetch_l2(codes_b + c * kChunkBytes);
  }
  wait_for_prior_grid();  // the activations (and, for fc1, the routing)
  allow_next_grid();
  if (!live) return;
  const int first = b.offsets[e], count = b.offsets[e + 1] - first;
  for (int m0 = 0; m0 < count; m0 += MR) {
    // Rows past the expert's last repeat it (no branch in the loop) and are not written.
    const TA* src[MR];
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      const int entry = first + min(m0 + r, count - 1);
      const int64_t row = p.by_token ? b.order[entry] / a.k : entry;
      src[r] = static_cast<const TA*>(p.src) + row * p.k;
    }
    float acc[2][MR] = {};
    for (int64_t c = lane; c < chunks; c += 64) {
      const bool second = c + 32 < chunks;
      const uint4 qa0 = load_codes(codes_a + c * kChunkBytes), qb0 = load_codes(codes_b + c * kChunkBytes);
      uint4 qa1{}, qb1{};
      if (second) qa1 = load_codes(codes_a + (c + 32) * kChunkBytes), qb1 = load_codes(codes_b + (c + 32) * kChunkBytes);
      accumulate_chunk<W, TW, TA, MR>(a, p, e, row_a, row_b, c * kPerChunk, qa0, qb0, src, acc);
      if (second) accumulate_chunk<W, TW, TA, MR>(a, p, e, row_a, row_b, (c + 32) * kPerChunk, qa1, qb1, src, acc);
    }
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      const float ya = warp_sum(acc[0][r]) + bias_of(a, p.a, e, row_a);
      const float yb = warp_sum(acc[1][r]) + (has_b ? bias_of(a, p.b, e, row_b) : 0.0f);
      if (lane != 0 || m0 + r >= count) continue;
      float* out = p.out + static_cast<int64_t>(first + m0 + r) * p.out_width;
      switch (p.epilogue) {
        case Epilogue::kGate: out[w] = gate(a, ya, yb); break;
        case Epilogue::kActivate:
          out[row_a] = activate(a.activation, ya);
          if (has_b) out[row_b] = activate(a.activation, yb);
          break;
        case Epilogue::kAffine:
          out[row_a] = ya;
          if (has_b) out[row_b] = yb;
          break;
      }
    }
  }
}

int log2_of(int64_t v) {
  int shift = 0;
  while ((int64_t{1} << shift) < v) ++shift;
  return shift;
}

// The launch's weight-format facts for projection `proj`.
void set_layout(const MoEArgs& a, const MoEProjection& proj, Pass& p) {
  p.k = proj.k;
  const int bits = a.weights == MoEWeights::kInt8 ? 8 : a.weights == MoEWeights::kFloat ? dtype_bits(a.dtype) : 4;
  p.row_bytes = proj.k * bits / 8;
  const int per_word = 32 / bits;
  const int64_t block = a.weights == MoEWeights::kFloat ? proj.k : proj.block_size;
  p.block_shift = log2_of(block);
  // Blocks are powers of two of at least 16 values, a word at most 8.
  p.param_words_mask = (a.per_row ? kWordsPerChunk : static_cast<int>(std::min<int64_t>(kWordsPerChunk, block / per_word))) - 1;
  p.zp_row_bytes = (proj.blocks * bits + 7) / 8;
}

template <int MR, typename T, typename TA>
cudaError_t queue_pass(const MoEArgs& a, const Pass& p, const Buffers& b, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(expert_slots(a)), static_cast<unsigned>((p.warps + kWarps - 1) / kWarps));
  const bool dependent = a.dependent_launch && dependent_launch_allowed();
  switch (a.weights) {
    case MoEWeights::kInt4:
      return launch_kernel(expert_kernel<MoEWeights::kInt4, uint8_t, TA, MR>, grid, dim3(kThreads), 0, s, dependent, a, p, b);
    case MoEWeights::kInt8:
      return launch_kernel(expert_kernel<MoEWeights::kInt8, uint8_t, TA, MR>, grid, dim3(kThreads), 0, s, dependent, a, p, b);
    case MoEWeights::kMxfp4:
      return launch_kernel(expert_kernel<MoEWeights::kMxfp4, uint8_t, TA, MR>, grid, dim3(kThreads), 0, s, dependent, a, p, b);
    case MoEWeights::kFloat: break;
  }
  return launch_kernel(expert_kernel<MoEWeights::kFloat, T, TA, MR>, grid, dim3(kThreads), 0, s, dependent, a, p, b);
}

// Rows of a tile: the most one expert can have (each token picks an expert once), in steps of
// powers of two up to kMaxMoETileRows.
int tile_rows(int64_t tokens) {
  int rows = 1;
  while (rows < kMaxMoETileRows && rows < tokens) rows *= 2;
  return rows;
}

template <typename T, typename TA>
Status queue(const MoEArgs& a, const Pass& p, const Buffers& b, cudaStream_t s, const char* what) {
  cudaError_t err = cudaSuccess;
  switch (tile_rows(a.tokens)) {
    case 1: err = queue_pass<1, T, TA>(a, p, b, s); break;
    case 2: err = queue_pass<2, T, TA>(a, p, b, s); break;
    case 4: err = queue_pass<4, T, TA>(a, p, b, s); break;
    default: err = queue_pass<8, T, TA>(a, p, b, s); break;
  }
  return cuda_status(err, what);
}

// fc1 reads the input (T), fc2 the f32 activations.
template <typename T>
Status queue_projections(const MoEArgs& a, const Pass& fc1, const Pass& fc2, const Buffers& b, cudaStream_t s) {
  OG_RETURN_IF_ERROR((queue<T, T>(a, fc1, b, s, "moe fc1 expert_kernel")));
  return queue<T, float>(a, fc2, b, s, "moe fc2 expert_kernel");
}

}  // namespace

Status launch_expert_projections(const MoEArgs& a, const Buffers& b, cudaStream_t s) {
  Pass fc1;
  fc1.a = a.fc1;
  fc1.b = a.has_fc3 ? a.fc3 : a.fc1;
  set_layout(a, a.fc1, fc1);
  if (a.gated()) {
    fc1.epilogue = Epilogue::kGate;
    fc1.warps = a.inter;
    const bool fused = a.activation == MoEActivation::kSwiGLU && a.swiglu_fusion != 0;
    fc1.row_step = fused && a.swiglu_fusion == 1 ? 2 : 1;
    fc1.b_offset = !fused ? 0 : a.swiglu_fusion == 1 ? 1 : a.inter;
  } else {
    fc1.epilogue = Epilogue::kActivate;
    fc1.warps = (a.inter + 1) / 2;
  }
  fc1.src = a.x, fc1.by_token = true;
  fc1.out = b.activations, fc1.out_width = a.inter;

  Pass fc2;
  fc2.a = fc2.b = a.fc2;
  set_layout(a, a.fc2, fc2);
  fc2.warps = (a.hidden + 1) / 2;
  fc2.routing_done = true;
  fc2.src = b.activations;
  fc2.out = b.expert_out, fc2.out_width = a.hidden;

  switch (a.dtype) {
    case DType::kF16: return queue_projections<__half>(a, fc1, fc2, b, s);
    case DType::kBF16: return queue_projections<__nv_bfloat16>(a, fc1, fc2, b, s);
    default: return queue_projections<float>(a, fc1, fc2, b, s);
  }
}

}  // namespace onnx_genai::cuda::moe
