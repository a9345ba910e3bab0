// MatMul / Gemm on CUDA: cuBLASLt for the products, one small kernel for Gemm's addend.
//
// Row-major (ONNX) to column-major (cuBLAS): a row-major [R, C] matrix is the column-major
// [C, R] matrix with the same bytes, its transpose. So Y = A B is computed as Y^T = B^T A^T:
//
//   cuBLASLt operand  | our matrix | column-major view (rows x cols, ld)   | op
//   A                 | B          | [N x K, ld N], or [K x N, ld K] trans_b | N, or T
//   B                 | A          | [K x M, ld K], or [M x K, ld M] trans_a | N, or T
//   C = D             | Y          | [N x M, ld N]                           |
//
// Numerics: compute type CUBLAS_COMPUTE_32F with f32 alpha / beta, and two heuristic filters so
// the CPU kernel's rounding holds: no implementation that rounds inputs (TF32 / 16-bit for f32
// inputs) or accumulates in 16 bits, and split-K partial sums only in f32 workspace (no
// reduction in the output type, nor "in place" with atomics, which is also run-to-run
// nondeterministic). Y is written in place (C == D), the layout every algorithm supports.
#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/memory.h"
#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/matmul_kernels.h"

namespace onnx_genai::cuda {

namespace {

// Base pointers the fast algorithm may assume (the arena's slots are 64-byte aligned, uploads
// 256): 16 bytes is what vectorised loads and TMA need.
constexpr uint64_t kBaseAlignment = 16;
// cuBLAS's recommendation for Hopper; the declared workspace is what the chosen algorithm needs.
constexpr uint64_t kMaxWorkspaceBytes = 32ull << 20;
// cuBLASLt wants its workspace 256-byte aligned; the arena gives 64, so 256 extra bytes let
// run() round the pointer up.
constexpr size_t kWorkspaceAlignment = 256;

// The opened library. Only called once shared_lt_handle has succeeded, which opened it: every
// other cuBLASLt call of a plan comes after its handle.
const CublasLtLibrary& lt() { return *cublas_lt_library().value(); }

Status lt_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return OG_ERROR(what, ": ", lt().status_name(status), " (", lt().status_string(status), ")");
}

// One cuBLASLt handle per device, shared by the plans on it and destroyed with the last one.
// cuBLASLt handles hold no stream or workspace (both are arguments of each call), so sharing
// one across kernels and threads is safe.
struct LtHandle {
  cublasLtHandle_t handle = nullptr;
  LtHandle() = default;
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  ~LtHandle() {
    if (handle != nullptr) (void)lt().destroy(handle);
  }
};

Result<std::shared_ptr<const LtHandle>> shared_lt_handle(int device) {
  if (device < 0 || device >= kMaxDevices) return OG_ERROR("CUDA device ", device, " out of range");
  static std::mutex mutex;
  static std::array<std::weak_ptr<const LtHandle>, kMaxDevices> handles;
  const std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<const LtHandle> existing = handles[static_cast<size_t>(device)].lock()) return existing;
  OG_RETURN_IF_ERROR(cublas_lt_library().status());
  auto made = std::make_shared<LtHandle>();
  OG_RETURN_IF_ERROR(lt_status(lt().create(&made->handle), "cublasLtCreate"));
  handles[static_cast<size_t>(device)] = made;
  return std::shared_ptr<const LtHandle>(std::move(made));
}

Result<cudaDataType_t> lt_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: return OG_ERROR("cuBLASLt products take f32, f16 or bf16, not ", dtype_name(dtype));
  }
}

// The largest power of two up to kBaseAlignment dividing every byte offset a call adds to a base
// pointer: each element offset in `offsets` and the batch stride, times `element_bytes`.
uint32_t kept_alignment(std::span<const int64_t> offsets, int64_t stride, size_t element_bytes) {
  uint64_t bits = kBaseAlignment | static_cast<uint64_t>(stride) * element_bytes;
  for (int64_t offset : offsets) bits |= static_cast<uint64_t>(offset) * element_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

template <typename T>
Status set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, T value) {
  return lt_status(lt().matrix_layout_set_attribute(layout, attr, &value, sizeof(value)), "cublasLtMatrixLayoutSetAttribute");
}

template <typename T>
Status set_attribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  return lt_status(lt().preference_set_attribute(pref, attr, &value, sizeof(value)),
                   "cublasLtMatmulPreferenceSetAttribute");
}

// A column-major rows x cols layout with leading dimension ld, `batch` matrices `stride` apart.
Status init_layout(cublasLtMatrixLayoutOpaque_t& layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                   int64_t batch, int64_t stride) {
  OG_RETURN_IF_ERROR(lt_status(
      lt().matrix_layout_init(&layout, sizeof(layout), type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
      "cublasLtMatrixLayoutInit"));
  OG_RETURN_IF_ERROR(set_attribute(&layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch)));
  return set_attribute(&layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
}

struct Algorithm {
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  float waves = 0.0f;
};

// Minimum pointer alignments (bytes) an algorithm may rely on, per our operand.
struct Alignments {
  uint32_t a = 0, b = 0, y = 0;
};

// The heuristic's answer depends only on the device, the product's shape and layouts and the
// alignments; a decoder's layers repeat a handful of shapes, so a plan queries each one once.
using HeuristicKey = std::array<int64_t, 13>;

class HeuristicCache {
 public:
  std::optional<std::vector<Algorithm>> find(const HeuristicKey& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  void insert(const HeuristicKey& key, const std::vector<Algorithm>& ranked) {
    const std::lock_guard<std::mutex> lock(mutex_);
    // Bounded: every new prompt length brings its own M.
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(key, ranked);
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<HeuristicKey, std::vector<Algorithm>> entries_;
};

HeuristicCache& heuristic_cache() {
  static HeuristicCache cache;
  return cache;
}

}  // namespace

struct CublasLtGemm::State {
  GemmProblem problem;
  int device = 0;
  size_t element_bytes = 0;
  bool nothing_to_compute = false;  // an empty output, or k == 0 with beta == 1
  bool zero_fill = false;           // k == 0 with beta == 0: Y = 0
  std::shared_ptr<const LtHandle> handle;
  cublasLtMatmulDescOpaque_t op{};
  cublasLtMatrixLayoutOpaque_t a_layout{}, b_layout{}, y_layout{};
  Algorithm aligned;                   // for 16-byte aligned base pointers
  std::optional<Algorithm> unaligned;  // for any others; absent when `aligned` assumes no more than elements
  Alignments aligned_for;

  Status init_descriptors();
  // The heuristic's ranked algorithms for the given alignments (at most kMaxCandidates).
  Result<std::vector<Algorithm>> ranked_algorithms(const Alignments& alignments);
};

Status CublasLtGemm::State::init_descriptors() {
  const GemmProblem& p = problem;
  OG_ASSIGN_OR_RETURN(const cudaDataType_t type, lt_type(p.dtype));
  OG_RETURN_IF_ERROR(lt_status(lt().matmul_desc_init(&op, sizeof(op), CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescInit"));
  const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  OG_RETURN_IF_ERROR(lt_status(lt().matmul_desc_set_attribute(&op, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)),
                               "cublasLtMatmulDescSetAttribute"));
  OG_RETURN_IF_ERROR(lt_status(lt().matmul_desc_set_attribute(&op, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)),
                               "cublasLtMatmulDescSetAttribute"));
  // See the table at the top: our B is cuBLASLt's A, our A its B.
  OG_RETURN_IF_ERROR(p.trans_b ? init_layout(b_layout, type, p.k, p.n, p.k, p.batch, p.b_stride)
                               : init_layout(b_layout, type, p.n, p.k, p.n, p.batch, p.b_stride));
  OG_RETURN_IF_ERROR(p.trans_a ? init_layout(a_layout, type, p.m, p.k, p.m, p.batch, p.a_stride)
                               : init_layout(a_layout, type, p.k, p.m, p.k, p.batch, p.a_stride));
  return init_layout(y_layout, type, p.n, p.m, p.n, p.batch, p.m * p.n);
}

Result<std::vector<Algorithm>> CublasLtGemm::State::ranked_algorithms(const Alignments& alignments) {
  const GemmProblem& p = problem;
  const HeuristicKey key{device, static_cast<int64_t>(p.dtype), p.m, p.n, p.k, p.trans_a, p.trans_b, p.batch,
                         p.a_stride, p.b_stride, alignments.a, alignments.b, alignments.y};
  if (std::optional<std::vector<Algorithm>> cached = heuristic_cache().find(key)) return *std::move(cached);
  cublasLtMatmulPreferenceOpaque_t pref{};
  OG_RETURN_IF_ERROR(lt_status(lt().preference_init(&pref, sizeof(pref)), "cublasLtMatmulPreferenceInit"));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                   static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)));
  uint64_t excluded = CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F;
  if (problem.dtype == DType::kF32) {
    excluded |= CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32 | CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F |
                CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF;
  }
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, ~excluded));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.b));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.a));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.y));
  OG_RETURN_IF_ERROR(set_attribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.y));
  std::array<cublasLtMatmulHeuristicResult_t, kMaxCandidates> results{};
  int returned = 0;
  OG_RETURN_IF_ERROR(lt_status(lt().algo_get_heuristic(handle->handle, &op, &b_layout, &a_layout, &y_layout,
                                                              &y_layout, &pref, kMaxCandidates, results.data(), &returned),
                               "cublasLtMatmulAlgoGetHeuristic"));
  std::vector<Algorithm> ranked;
  for (int i = 0; i < returned; ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[static_cast<size_t>(i)];
    if (r.state == CUBLAS_STATUS_SUCCESS) ranked.push_back(Algorithm{r.algo, r.workspaceSize, r.wavesCount});
  }
  heuristic_cache().insert(key, ranked);
  return ranked;
}

CublasLtGemm::CublasLtGemm(std::unique_ptr<State> state) : state_(std::move(state)) {}
CublasLtGemm::~CublasLtGemm() = default;

Result<std::unique_ptr<CublasLtGemm>> CublasLtGemm::plan(const GemmProblem& problem, int candidate) {
  const GemmProblem& p = problem;
  const size_t calls = p.a_offsets.size();
  if (p.b_offsets.size() != calls) return OG_ERROR("GemmProblem: ", calls, " A offsets but ", p.b_offsets.size(), " B offsets");
  if (p.batch > INT32_MAX) return OG_ERROR("GemmProblem: batch ", p.batch, " exceeds cuBLASLt's int32 batch count");
  auto state = std::make_unique<State>();
  state->problem = p;
  state->element_bytes = static_cast<size_t>(dtype_storage_bytes(p.dtype, 1));
  if (p.m == 0 || p.n == 0 || p.batch == 0 || calls == 0 || (p.k == 0 && p.beta != 0.0f)) {
    if (p.k == 0 && p.beta != 0.0f && p.beta != 1.0f) return OG_ERROR("GemmProblem: k == 0 needs beta 0 or 1, got ", p.beta);
    state->nothing_to_compute = true;
    return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(std::move(state)));
  }
  if (p.k == 0) {
    state->zero_fill = true;
    return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(std::move(state)));
  }
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&state->device), "current CUDA device"));
  OG_ASSIGN_OR_RETURN(state->handle, shared_lt_handle(state->device));
  OG_RETURN_IF_ERROR(state->init_descriptors());
  const size_t bytes = state->element_bytes;
  const std::vector<int64_t> y_offsets{calls > 1 ? p.batch * p.m * p.n : 0};
  state->aligned_for = {kept_alignment(p.a_offsets, p.a_stride, bytes), kept_alignment(p.b_offsets, p.b_stride, bytes),
                        kept_alignment(y_offsets, p.m * p.n, bytes)};
  OG_ASSIGN_OR_RETURN(std::vector<Algorithm> ranked, state->ranked_algorithms(state->aligned_for));
  if (candidate < 0 || static_cast<size_t>(candidate) >= ranked.size()) {
    return OG_ERROR("cuBLASLt offers ", ranked.size(), " algorithms for this product, no candidate ", candidate);
  }
  state->aligned = ranked[static_cast<size_t>(candidate)];
  const auto element = static_cast<uint32_t>(bytes);
  const Alignments& kept = state->aligned_for;
  if (kept.a > element || kept.b > element || kept.y > element) {
    OG_ASSIGN_OR_RETURN(std::vector<Algorithm> fallback, state->ranked_algorithms({element, element, element}));
    if (fallback.empty()) return OG_ERROR("cuBLASLt offers no algorithm for this product at element alignment");
    state->unaligned = fallback.front();
  }
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(std::move(state)));
}

size_t CublasLtGemm::workspace_bytes() const {
  const State& s = *state_;
  const size_t most = std::max(s.aligned.workspace_bytes, s.unaligned ? s.unaligned->workspace_bytes : 0);
  return most > 0 ? most + kWorkspaceAlignment : 0;
}

Status CublasLtGemm::run(const void* a, const void* b, void* y, void* workspace, void* stream) const {
  State& s = *state_;
  const GemmProblem& p = s.problem;
  if (s.nothing_to_compute) return Status::ok();
  const size_t bytes = s.element_bytes;
  if (s.zero_fill) {
    return fill_bytes(y, 0, static_cast<size_t>(p.m * p.n * p.batch) * bytes * p.a_offsets.size(), stream);
  }
  const uintptr_t bases = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(y);
  const Algorithm& algo = s.unaligned && bases % kBaseAlignment != 0 ? *s.unaligned : s.aligned;
  void* scratch = nullptr;
  if (algo.workspace_bytes > 0) {
    const uintptr_t w = reinterpret_cast<uintptr_t>(workspace);
    scratch = reinterpret_cast<void*>((w + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment);
  }
  const float alpha = p.alpha, beta = p.beta;
  const auto* a_bytes = static_cast<const char*>(a);
  const auto* b_bytes = static_cast<const char*>(b);
  auto* y_bytes = static_cast<char*>(y);
  const size_t y_call_bytes = static_cast<size_t>(p.batch * p.m * p.n) * bytes;
  for (size_t g = 0; g < p.a_offsets.size(); ++g) {
    const char* ag = a_bytes + static_cast<size_t>(p.a_offsets[g]) * bytes;
    const char* bg = b_bytes + static_cast<size_t>(p.b_offsets[g]) * bytes;
    char* yg = y_bytes + g * y_call_bytes;
    OG_RETURN_IF_ERROR(lt_status(lt().matmul(s.handle->handle, &s.op, &alpha, bg, &s.b_layout, ag, &s.a_layout, &beta,
                                                yg, &s.y_layout, yg, &s.y_layout, &algo.algo, scratch,
                                                algo.workspace_bytes, static_cast<cudaStream_t>(stream)),
                                 "cublasLtMatmul"));
  }
  return Status::ok();
}

namespace {

template <typename T>
int64_t algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  const cublasStatus_t status = lt().algo_config_get_attribute(&algo, attr, &value, sizeof(value), &written);
  return status == CUBLAS_STATUS_SUCCESS ? static_cast<int64_t>(value) : -1;
}

std::string describe_algorithm(const Algorithm& a) {
  const cublasLtMatmulAlgo_t& algo = a.algo;
  return "algo " + std::to_string(algo_config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " split-k " +
         std::to_string(algo_config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + " reduction " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + " swizzle " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) + " cluster " +
         std::to_string(algo_config<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)) + " workspace " +
         std::to_string(a.workspace_bytes) + " B, waves " + std::to_string(a.waves);
}

// One thread per output element (grid-stride): Gemm's addend is read once per output row at
// most, a negligible pass next to the product that follows.
template <typename T>
__global__ void broadcast_addend_kernel(int64_t m, int64_t n, const T* c, int64_t c_rs, int64_t c_cs, float scale, T* y) {
  const int64_t total = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int64_t i = idx / n, j = idx - i * n;
    y[idx] = from_float<T>(scale * to_float(c[i * c_rs + j * c_cs]));
  }
}

}  // namespace

std::string CublasLtGemm::describe() const {
  const State& s = *state_;
  if (s.nothing_to_compute || s.zero_fill) return "no product (empty)";
  std::string text = describe_algorithm(s.aligned);
  if (s.unaligned) text += "; unaligned pointers: " + describe_algorithm(*s.unaligned);
  return text;
}

Status launch_broadcast_addend(DType dtype, int64_t m, int64_t n, const void* c, int64_t c_rs, int64_t c_cs,
                               float scale, void* y, void* stream) {
  const int64_t total = m * n;
  if (total == 0) return Status::ok();
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 4096;  // grid-stride past this: enough blocks to fill 132 SMs
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  const bool known = dispatch_float_type(dtype, [&]<typename T>() {
    broadcast_addend_kernel<T><<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        m, n, static_cast<const T*>(c), c_rs, c_cs, scale, static_cast<T*>(y));
  });
  if (!known) return OG_ERROR("Gemm addend: unsupported dtype ", dtype_name(dtype));
  return launch_status("broadcast_addend_kernel");
}

}  // namespace onnx_genai::cuda
