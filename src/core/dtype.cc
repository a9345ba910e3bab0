#include "onnx_genai/dtype.h"

namespace onnx_genai {

int dtype_bits(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kU8:
    case DType::kI8:
    case DType::kF8E8M0: return 8;
    case DType::kU16:
    case DType::kI16:
    case DType::kF16:
    case DType::kBF16: return 16;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 32;
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 64;
    case DType::kU4:
    case DType::kI4: return 4;
    case DType::kUndefined:
    case DType::kString: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kF32: return "float32";
    case DType::kU8: return "uint8";
    case DType::kI8: return "int8";
    case DType::kU16: return "uint16";
    case DType::kI16: return "int16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kF16: return "float16";
    case DType::kF64: return "float64";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    case DType::kBF16: return "bfloat16";
    case DType::kU4: return "uint4";
    case DType::kI4: return "int4";
    case DType::kF8E8M0: return "float8e8m0";
  }
  return "invalid";
}

bool dtype_is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::kU8: case DType::kI8: case DType::kU16: case DType::kI16: case DType::kI32:
    case DType::kI64: case DType::kU32: case DType::kU64: case DType::kU4: case DType::kI4:
      return true;
    default: return false;
  }
}

bool dtype_is_known(int32_t onnx_type) {
  auto t = static_cast<DType>(onnx_type);
  return onnx_type >= 0 && t != DType::kString && dtype_bits(t) > 0 && dtype_name(t) != "invalid";
}

int64_t dtype_storage_bytes(DType t, int64_t count) {
  return (count * dtype_bits(t) + 7) / 8;
}

uint16_t Float16::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): shift the implicit-one mantissa into place with round-to-even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const int exp = static_cast<int>(abs >> 23);
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exp;  // 113 - exp + 13
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias exponent, round mantissa to 10 bits (nearest even).
  abs += 0xc8000fffu + ((abs >> 13) & 1u);  // -(112 << 23) + rounding bias
  return static_cast<uint16_t>(sign | (abs >> 13));
}

float Float16::to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace onnx_genai
