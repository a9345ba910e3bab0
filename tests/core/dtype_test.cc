#include "onnx_genai/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace onnx_genai {
namespace {

TEST(Float16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = Float16::to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Float16::to_float(Float16::from_float(f))));
      continue;
    }
    ASSERT_EQ(Float16::from_float(f), h) << "half bits " << h;
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(Float16::from_float(1.0f), 0x3c00);
  EXPECT_EQ(Float16::from_float(-2.0f), 0xc000);
  EXPECT_EQ(Float16::from_float(65504.0f), 0x7bff);
  EXPECT_EQ(Float16::from_float(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(Float16::from_float(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Float16::from_float(1.0f + 1.0f / 2048), 0x3c00);  // tie rounds to even
  EXPECT_EQ(Float16::from_float(1.0f + 3.0f / 2048), 0x3c02);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16::from_float(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16::to_float(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(BFloat16::to_float(BFloat16::from_float(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BFloat16::from_float(1.00390625f), 0x3f80);  // exact tie -> even
}

TEST(DType, StorageBytes) {
  EXPECT_EQ(dtype_storage_bytes(DType::kF32, 3), 12);
  EXPECT_EQ(dtype_storage_bytes(DType::kI4, 3), 2);
  EXPECT_EQ(dtype_storage_bytes(DType::kBF16, 5), 10);
}

}  // namespace
}  // namespace onnx_genai
