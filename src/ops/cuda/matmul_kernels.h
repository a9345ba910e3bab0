// Launch interface of MatMul / Gemm on CUDA (matmul_kernels.cu): cuBLASLt, planned once per shape.
// No CUDA headers needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Y = alpha * op(A) op(B) + beta * Y on row-major matrices (ONNX's layout), as calls of `batch`
// products each (element offsets and strides; a stride of 0 reuses one matrix for the call):
//   call g, product i:  A at a + a_offsets[g] + i * a_stride: [M, K], or [K, M] with trans_a
//                       B at b + b_offsets[g] + i * b_stride: [K, N], or [N, K] with trans_b
//                       Y at y + (g * batch + i) * M * N:     [M, N], dense
// f32 / f16 / bf16, all operands of `dtype`; products accumulate in f32 (never TF32) and each
// output is rounded once, as on the CPU.
struct GemmProblem {
  DType dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t a_stride = 0, b_stride = 0;
  std::vector<int64_t> a_offsets{0}, b_offsets{0};  // one per call
  float alpha = 1.0f;
  // beta != 0: Y holds the addend when run() starts. With k == 0 the product is empty and beta
  // must be 0 (Y = 0) or 1 (Y kept).
  float beta = 0.0f;
};

// A GemmProblem planned for cuBLASLt on the calling thread's current device: descriptors built
// and the algorithm chosen once (the heuristic's ranked list, queried here), so run() only
// enqueues. The cuBLASLt handle is shared by every plan on the device and destroyed with the last.
//
// Alignment: the algorithm is chosen for the alignment the offsets and strides keep when every
// base pointer is 16-byte aligned (arena slots and uploads are); a second one, chosen for
// element alignment, serves pointers that are not (a caller's tensor at an odd offset).
class CublasLtGemm {
 public:
  static constexpr int kMaxCandidates = 8;

  // `candidate` picks an algorithm from the heuristic's list (0: its first choice; the others
  // for timing them side by side); an error when the list is shorter.
  static Result<std::unique_ptr<CublasLtGemm>> plan(const GemmProblem& problem, int candidate = 0);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Device scratch run() needs (declare it as the kernel's workspace); any alignment.
  size_t workspace_bytes() const;
  // Enqueues the product on `stream` (a cudaStream_t): no allocation, no synchronisation, safe
  // under stream capture. `workspace` holds workspace_bytes().
  Status run(const void* a, const void* b, void* y, void* workspace, void* stream) const;
  // The chosen algorithm ("algo 23 tile 18 stages 14 split-k 1 ..."), for timing logs.
  std::string describe() const;

 private:
  struct State;
  explicit CublasLtGemm(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// y [m, n] = scale * c broadcast to [m, n], element (i, j) of c at c[i * c_rs + j * c_cs]
// (strides 0 along broadcast dims): Gemm's addend laid into Y ahead of the product. All
// pointers are device pointers of `dtype`.
Status launch_broadcast_addend(DType dtype, int64_t m, int64_t n, const void* c, int64_t c_rs, int64_t c_cs,
                               float scale, void* y, void* stream);

}  // namespace onnx_genai::cuda
