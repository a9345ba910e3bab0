// What the host CPU can run, read once with cpuid. Kernels compiled for AVX2 or AVX-512 are
// chosen at run time from these flags, so one binary serves AVX2-only and AVX-512 machines.
// OG_CPU_ISA=avx2|scalar lowers the choice (tests and benchmarks use it to exercise every path).
#pragma once

namespace onnx_genai {

struct CpuFeatures {
  bool avx2 = false;  // with FMA and F16C
  bool avx512 = false;  // F, BW, VL, DQ
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
};

const CpuFeatures& cpu_features();

}  // namespace onnx_genai
