// The per-ISA half of the GEMM driver: each instruction set compiles gemm_impl.h in its own
// translation unit (avx512/gemm_avx512.cc, avx2/gemm_avx2.cc, gemm_scalar.cc) and exposes it
// through one of these tables.
#pragma once

#include <cstdint>

#include "ops/cpu/gemm_driver.h"

namespace onnx_genai {

struct GemmKernelSet {
  int64_t mr = 0;  // rows of the micro-kernel tile
  int64_t nr = 0;  // columns of the tile = width of a packed B panel
  int64_t kc = 0;  // depth of one packed slice (A tile + B panel stay in L1/L2)
  int64_t mc = 0;  // rows of A packed per slice
  int64_t nc = 0;  // columns of B per task
  // Packs the whole [k, n] matrix `b` into panels (layout of GemmPackedB).
  void (*pack_b)(const GemmOperand& b, int64_t k, int64_t n, float* dst) = nullptr;
  // Runs the tasks of `chunk` (plan.tasks split evenly over plan.chunks); `workspace` is the
  // chunk's own plan.chunk_floats.
  void (*run_chunk)(const GemmPlan& plan, const GemmArgs& args, int64_t chunk, float* workspace) = nullptr;
};

const GemmKernelSet& gemm_kernels_scalar();
const GemmKernelSet& gemm_kernels_avx2();
const GemmKernelSet& gemm_kernels_avx512();
const GemmKernelSet& gemm_kernels(GemmIsa isa);

}  // namespace onnx_genai
