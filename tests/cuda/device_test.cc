// What works without a GPU: the capability check's wording, the registry's CUDA entries and the
// CUDA kernels' prepare-time validation (prepare runs on the host).
#include "cuda_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(CudaDevice, CapabilityCheckSaysWhyInOneLine) {
  EXPECT_TRUE(cuda::check_compute_capability(9, 0).is_ok());
  EXPECT_EQ(cuda::check_compute_capability(8, 0).message(), "compute capability 8.0 < 9.0: this build has sm_90a code only");
  EXPECT_EQ(cuda::check_compute_capability(10, 0).message(), "compute capability 10.0 != 9.0: this build has sm_90a code only");
}

TEST(CudaDevice, UsableDeviceAnswersEitherWay) {
  // On a machine without a device this is an error with a reason, never a crash.
  Result<cuda::DeviceInfo> device = cuda::usable_device(0);
  if (device.is_ok()) {
    EXPECT_EQ(device->major, 9);
    EXPECT_GT(device->sm_count, 0);
  } else {
    EXPECT_FALSE(device.status().message().empty());
    EXPECT_EQ(device.status().message().find('\n'), std::string::npos);
  }
  EXPECT_FALSE(cuda::usable_device(cuda::kMaxDevices + 3).is_ok());
}

TEST(CudaRegistry, FindsCudaKernelsByDeviceAndDtype) {
  CudaNode spec("SkipSimplifiedLayerNormalization", "com.microsoft", {true});
  const Node& node = spec.with_inputs({});
  const DType f16[] = {DType::kF16};
  EXPECT_TRUE(OpRegistry::instance().find_kernel(node, DeviceType::kCuda, f16).is_ok());
  const DType f64[] = {DType::kF64};
  Result<const KernelDef*> none = OpRegistry::instance().find_kernel(node, DeviceType::kCuda, f64);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no CUDA kernel"), std::string::npos) << none.status().message();
}

// 8-bit weights prepare on the host (f32 activations plan the CUDA-core GEMV, which needs no
// device query); a B laid out for 4-bit codes is rejected naming the node.
TEST(CudaMatMulNBits, PrepareTakesEightBitWeightsNamingTheNodeOnBadInput) {
  CudaNode spec("MatMulNBits", "com.microsoft", {true});
  spec.attr_int("K", 64).attr_int("N", 8).attr_int("bits", 8).attr_int("block_size", 32);
  std::vector<Tensor> inputs{Tensor::allocate(DType::kF32, Shape{1, 64}).value(),
                             Tensor::allocate(DType::kU8, Shape{8, 2, 32}).value(),
                             Tensor::allocate(DType::kF32, Shape{16}).value()};
  Result<PreparedNode> prepared = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
  EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();

  inputs[1] = Tensor::allocate(DType::kU8, Shape{8, 2, 16}).value();
  Result<PreparedNode> four_bit_layout = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
  ASSERT_FALSE(four_bit_layout.is_ok());
  const std::string& message = four_bit_layout.status().message();
  EXPECT_NE(message.find("cuda_test_MatMulNBits"), std::string::npos) << message;
  EXPECT_NE(message.find("B [8,2,16] does not match"), std::string::npos) << message;
}

}  // namespace
}  // namespace onnx_genai::testing
