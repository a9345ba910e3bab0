#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

namespace onnx_genai {

namespace {

bool os_saves_registers(unsigned mask) {
  unsigned eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & mask) == mask;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & bit_OSXSAVE;
  const bool fma = ecx & bit_FMA;
  const bool f16c = ecx & bit_F16C;
  if (!osxsave || !os_saves_registers(0x6)) return f;  // XMM and YMM state
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx & bit_AVX2) && fma && f16c;
  const bool zmm = os_saves_registers(0xe6);  // opmask, ZMM_Hi256, Hi16_ZMM
  f.avx512 = zmm && (ebx & bit_AVX512F) && (ebx & bit_AVX512BW) && (ebx & bit_AVX512VL) && (ebx & bit_AVX512DQ);
  f.avx512_vnni = f.avx512 && (ecx & bit_AVX512VNNI);
  unsigned eax1, ebx1, ecx1, edx1;
  __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
  f.avx512_bf16 = f.avx512 && (eax1 & bit_AVX512BF16);

  if (const char* isa = std::getenv("OG_CPU_ISA")) {
    if (std::strcmp(isa, "avx2") == 0) {
      f.avx512 = f.avx512_vnni = f.avx512_bf16 = false;
    } else if (std::strcmp(isa, "scalar") == 0) {
      f = CpuFeatures{};
    }
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace onnx_genai
