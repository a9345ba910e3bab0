// The constants of softmax.h's exp and fixed-point weights, in a header without the standard
// library so that nvcc compiles it too: the device twin of the sampler's softmax
// (src/ops/cuda/sampling_kernels.cu) takes its numbers from here, and rounds each operation the
// way the host does (softmax.h explains the method).
#pragma once

#include <cstdint>

namespace onnx_genai::sampling {

// exp_nonpositive(x) = 2^k * p(r), x = k * ln2 + r (Cody-Waite: ln2 split in a high part with few
// mantissa bits, so k * kLn2Hi is exact, and the rest).
constexpr float kExpLog2e = 1.44269504f;
constexpr float kExpLn2Hi = 0.693359375f;
constexpr float kExpLn2Lo = -2.12194440e-4f;
// Adding 1.5 * 2^23 rounds to the nearest integer and leaves it in the low mantissa bits.
constexpr float kExpRoundingShift = 0x1.8p23f;
// At or below this the result would be subnormal: exp_nonpositive gives 0 (and for NaN).
constexpr float kExpLowest = -87.0f;
// p(r) = sum r^n / n! for n <= 7, Horner's coefficients from r^7 down.
constexpr float kExpPoly7 = 1.0f / 5040.0f;
constexpr float kExpPoly6 = 1.0f / 720.0f;
constexpr float kExpPoly5 = 1.0f / 120.0f;
constexpr float kExpPoly4 = 1.0f / 24.0f;
constexpr float kExpPoly3 = 1.0f / 6.0f;
constexpr float kExpPoly2 = 0.5f;

// A weight is at most kWeightScale, so a vocabulary of up to kMaxVocabulary tokens sums below 2^64.
constexpr double kWeightScale = 0x1p44;
constexpr int64_t kMaxVocabulary = int64_t{1} << 20;

}  // namespace onnx_genai::sampling
