// Seeded randomness that is bit-identical on every platform: SFC64 (Doty-Humphrey's Small Fast
// Chaotic generator; numpy ships the same one) seeded through SplitMix64, and a fixed
// u64 -> double map. std::uniform_real_distribution is avoided: its output is
// implementation-defined, so a seed would give different tokens under different standard libraries.
#pragma once

#include <array>
#include <cstdint>

namespace onnx_genai::sampling {

inline uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// {a, b, c, counter}.
using Sfc64State = std::array<uint64_t, 4>;

inline uint64_t sfc64_next(Sfc64State& s) {
  const uint64_t out = s[0] + s[1] + s[3]++;
  s[0] = s[1] ^ (s[1] >> 11);
  s[1] = s[2] + (s[2] << 3);
  s[2] = ((s[2] << 24) | (s[2] >> 40)) + out;
  return out;
}

// a, b, c from SplitMix64 (so nearby seeds give unrelated states), counter 1, then 12 outputs
// discarded to mix the state, as SFC's author recommends.
inline Sfc64State sfc64_seed(uint64_t seed) {
  uint64_t mix = seed;
  Sfc64State s{};
  s[0] = splitmix64_next(mix);
  s[1] = splitmix64_next(mix);
  s[2] = splitmix64_next(mix);
  s[3] = 1;
  for (int i = 0; i < 12; ++i) sfc64_next(s);
  return s;
}

// Uniform in [0, 1): the top 53 bits scaled by 2^-53, exact in a double.
inline double sfc64_next_double(Sfc64State& s) {
  return static_cast<double>(sfc64_next(s) >> 11) * 0x1.0p-53;
}

}  // namespace onnx_genai::sampling
