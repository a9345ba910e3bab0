// MatMulNBits (4- and 8-bit) GEMV / small-M GEMM on the GPU against the device's measured copy
// bandwidth (the roofline of a kernel that streams its weights once), and the attention kernels
// (cuda_attention.cc).
//
//   cuda_bench [json_path [case]]  (default cuda_bench.json; markdown tables go to stdout;
//                                  case: run only the shapes whose "group KxN/bBLOCK" contains it,
//                                  e.g. "gemv 18944x3584/b32", to profile one under ncu, and the
//                                  attention cases whose name does, e.g. "gqa-prompt" or "paged")
//
// For each (K, N, block) at M = 1 and M = 8, f16 activations and scales, no zero points, and each
// variant (kVariants: the CUDA-core kernel; the tensor-core kernel as the planner picks it, with
// its standard ring and with its deep one, each at the planner's and at every forced split of
// K, and the standard one launched after the previous kernel ends instead of as its dependent):
// time with
// CUDA events over replays of a CUDA graph of launches (warm-up first, median of kReps replays),
// each launch reading a different copy of the weights so that the set of copies is several
// times the L2 and every launch streams from DRAM. Reports the weight bytes (codes + scales)
// read per second as a fraction of a device-to-device copy measured in the same run (bytes read
// + bytes written): on stdout one line per (shape, M) with the planned variants and the best of
// all, and time(M=8) / time(M=1); every variant in the JSON. Outputs are checked against the
// CUDA-core kernel's. Shapes: Llama-3-8B-like projections (4096 / 14336), Qwen2.5-7B's (q+k+v
// 3584 x 4608, o 3584 x 3584, down 18944 x 3584), a 152k-row vocabulary head (K = 896), and
// Qwen2.5-0.5B's decode projections (q+k+v 896 x 1152, o 896 x 896, gate/up 896 x 4864, down
// 4864 x 896). Then a decoder MLP's gate and up (Qwen2.5 0.5B and 7B) at M = 1 and 8, as two
// GEMVs and fused with the SwiGLU epilogue, the fused one in every variant. 8-bit weights (group
// "gemv8", quantized_matmul8_kernels.h): Qwen2.5-7B's gate / up (3584 x 18944) and down
// (18944 x 3584) and Llama-3-8B's 4096 x 4096, blocks of 32 and 128, the same variants (the deep
// ring where the 8-bit kernel has one) and report, bytes read counting one byte per code. Many
// rows (group "gemm": M = 16..512 of Qwen2.5-7B's, Llama-3-8B's and 0.5B's projections, gate and
// up as one 2N-row matrix): the tiled int4 GEMM (int4_gemm.h, its reordered weights) as planned and
// in other tiles and splits, up to 64 rows the tensor-core kernel (its many-row form past 16 rows)
// as planned and at every forced split of K, against the dense path (dequantise, cuBLASLt), against
// cuBLASLt on f16 weights alone (the fp16 tensor-core rate) and against M = 1.
//
// Then the attention cases of cuda_attention.cc: GroupQueryAttention prompts on the tiled and the
// flash kernel, PagedAttention serving steps on the CUDA-core and the tensor-core kernel; and the
// MoE layers of cuda_moe.cc (Qwen3-30B-A3B int4 / int8, gpt-oss-20b MXFP4; case "moe").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/device.h"
#include "core/cuda/memory.h"
#include "cuda_common.h"
#include "ops/cuda/dequantize_kernels.h"
#include "ops/cuda/dequantized_matmul.h"
#include "ops/cuda/int4_gemm.h"
#include "ops/cuda/quantized_matmul8_kernels.h"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "onnx_genai/dtype.h"

namespace onnx_genai {
namespace {

// Bytes read plus bytes written per second by a large device-to-device copy.
double copy_bandwidth(cudaStream_t stream) {
  constexpr size_t kBytes = size_t{1} << 30;
  cuda::DeviceBuffer src = value_or_exit(cuda::DeviceBuffer::allocate(kBytes));
  cuda::DeviceBuffer dst = value_or_exit(cuda::DeviceBuffer::allocate(kBytes));
  BENCH_CHECK(cuda::fill_bytes(src.data(), 0x5A, kBytes, stream));
  const double ms = median_ms(stream, [&] {
    BENCH_CHECK(check(cudaMemcpyAsync(dst.data(), src.data(), kBytes, cudaMemcpyDeviceToDevice, stream), "copy"));
  });
  return 2.0 * static_cast<double>(kBytes) / (ms * 1e-3);
}

struct Shape2 {
  int64_t k, n, block;
  int bits = 4;  // of the codes: 4 or 8
};

// A kernel choice the plan is given, named for the tables.
struct Variant {
  const char* name;
  cuda::MatMulNBits4Choice choice;
};
using K4 = cuda::MatMulNBits4Kernel;
constexpr Variant kVariants[] = {
    {"cuda-core", {K4::kCudaCore, 0}},
    {"tc", {K4::kTensorCore, 0}},  // before the others: the gate/up group's reference
    {"planned", {K4::kAuto, 0}},
    {"deep", {K4::kTensorCoreDeep, 0}},
    {"tc/ks1", {K4::kTensorCore, 1}},
    {"tc/ks2", {K4::kTensorCore, 2}},
    {"tc/ks4", {K4::kTensorCore, 4}},
    {"tc/ks8", {K4::kTensorCore, 8}},
    {"deep/ks1", {K4::kTensorCoreDeep, 1}},
    {"deep/ks2", {K4::kTensorCoreDeep, 2}},
    {"deep/ks4", {K4::kTensorCoreDeep, 4}},
    {"deep/ks8", {K4::kTensorCoreDeep, 8}},
    {"tc/serial", {K4::kTensorCore, 0, false}}};  // launched after the previous kernel ends

struct Row {
  // "gemv", "gemv8" (8-bit codes), "gate_up" (n: the output width; "two GEMVs" is the unfused
  // pair), or "gemm" (many rows; "dense" is the dequantised cuBLASLt path)
  const char* group;
  Shape2 shape;
  int64_t m;
  const char* variant;
  double us;  // NaN when the kernel failed
  double weight_bytes;
  bool tensor_core, deep_ring;  // what the plan ran
  int block_k_splits;
  double difference;  // against the group's reference output: max |y - ref| / max |ref|; NaN for it
  std::string error;
  int tile = 0;  // the int4 GEMM's (1..kInt4GemmConfigs; 0 for the other kernels)
};

// Copies of one weight set (codes and f16 scales of N rows) covering 4x the L2, so no launch
// finds its weights cached.
struct WeightCopies {
  std::vector<cuda::DeviceBuffer> codes, scales;
  size_t set_bytes = 0;
  int bits = 4;
};

WeightCopies make_weight_copies(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng) {
  const int64_t blocks = (s.k + s.block - 1) / s.block;
  const size_t code_bytes = static_cast<size_t>(s.n * blocks * s.block * s.bits / 8);
  const size_t scale_bytes = static_cast<size_t>(s.n * blocks) * 2;
  WeightCopies w;
  w.set_bytes = code_bytes + scale_bytes;
  w.bits = s.bits;
  const auto set = static_cast<int64_t>(w.set_bytes);
  const int copies = static_cast<int>(std::max<int64_t>(2, (4 * l2_bytes + set - 1) / set));
  std::vector<uint8_t> host_codes(code_bytes);
  for (auto& b : host_codes) b = static_cast<uint8_t>(rng());
  const std::vector<uint16_t> host_scales = random_f16(static_cast<size_t>(s.n * blocks), rng, -0.05f, 0.05f);
  for (int c = 0; c < copies; ++c) {
    w.codes.push_back(value_or_exit(cuda::DeviceBuffer::allocate(code_bytes)));
    w.scales.push_back(value_or_exit(cuda::DeviceBuffer::allocate(scale_bytes)));
    BENCH_CHECK(cuda::copy_to_device(w.codes.back().data(), host_codes.data(), code_bytes, stream));
    BENCH_CHECK(cuda::copy_to_device(w.scales.back().data(), host_scales.data(), scale_bytes, stream));
  }
  return w;
}

// Queues one planned product of `args` (the GEMV kernels, or the dense path) on a stream.
using Launch = std::function<Status(const cuda::MatMulNBits4Args&, cudaStream_t)>;

// Microseconds per launch group of `args` over the weight copies: per copy, `parts` launches on
// consecutive slices of args.n rows (separate projections in one buffer), replayed as one graph.
// `launch`: the planned GEMV kernel where none is given.
Result<double> time_launches(cuda::MatMulNBits4Args args, const WeightCopies& w, cudaStream_t stream, int parts = 1,
                             const Launch& launch = {}) {
  const int64_t slice_codes = args.n * args.blocks * args.block_size * w.bits / 8;
  const int64_t slice_scales = args.n * args.blocks * 2;
  const auto launch_all = [&]() -> Status {
    for (size_t c = 0; c < w.codes.size(); ++c) {
      for (int part = 0; part < parts; ++part) {
        args.b = static_cast<const uint8_t*>(w.codes[c].data()) + part * slice_codes;
        args.scales = static_cast<const char*>(w.scales[c].data()) + part * slice_scales;
        if (launch) {
          OG_RETURN_IF_ERROR(launch(args, stream));
        } else {
          OG_RETURN_IF_ERROR(w.bits == 8 ? cuda::launch_matmul_nbits8(args, stream)
                                         : cuda::launch_matmul_nbits4(args, stream));
        }
      }
    }
    return Status::ok();
  };
  OG_ASSIGN_OR_RETURN(const double ms, replay_ms(stream, launch_all));
  return ms * 1e3 / static_cast<double>(w.codes.size());
}

// Plans `args` (shapes set) for `choice`, times it over the weight copies into `y` and returns
// the row (its output compared against `reference` where one is given).
Row measure(const char* group, const Shape2& s, cuda::MatMulNBits4Args args, const char* name,
            cuda::MatMulNBits4Choice choice, const WeightCopies& weights, const cuda::DeviceBuffer& y,
            const cuda::DeviceBuffer* reference, size_t outputs, cudaStream_t stream, int parts = 1) {
  Row row{group, s, args.m, name, NAN, static_cast<double>(weights.set_bytes), false, false, 1, NAN, ""};
  const Status planned =
      weights.bits == 8 ? cuda::plan_matmul_nbits8(args, choice) : cuda::plan_matmul_nbits4(args, choice);
  args.y = y.data();
  Result<cuda::DeviceBuffer> workspace = cuda::DeviceBuffer::allocate(std::max<size_t>(args.workspace_bytes, 16));
  args.workspace = workspace.is_ok() ? workspace->data() : nullptr;
  Status ready = !planned.is_ok() ? planned : workspace.status();
  const Result<double> us = ready.is_ok() ? time_launches(args, weights, stream, parts) : Result<double>(ready);
  if (us.is_ok()) {
    row.us = *us;
    row.tensor_core = args.tensor_core, row.deep_ring = args.deep_ring;
    row.block_k_splits = args.block_k_splits;
    if (reference != nullptr) row.difference = relative_difference(y, *reference, outputs, stream);
  } else {
    row.error = us.status().message();
    std::fprintf(stderr, "cuda_bench: %s K=%lld N=%lld M=%lld %s: %s\n", group, static_cast<long long>(s.k),
                 static_cast<long long>(s.n), static_cast<long long>(args.m), name, row.error.c_str());
  }
  return row;
}

cuda::DeviceBuffer random_activations(int64_t m, int64_t k, cudaStream_t stream, std::mt19937& rng) {
  const std::vector<uint16_t> host = random_f16(static_cast<size_t>(m * k), rng, -1.0f, 1.0f);
  cuda::DeviceBuffer a = value_or_exit(cuda::DeviceBuffer::allocate(host.size() * 2));
  BENCH_CHECK(cuda::copy_to_device(a.data(), host.data(), host.size() * 2, stream));
  return a;
}

cuda::MatMulNBits4Args f16_args(int64_t m, int64_t n, const Shape2& s, const cuda::DeviceBuffer& a) {
  cuda::MatMulNBits4Args args;
  args.dtype = DType::kF16;
  args.m = m, args.n = n, args.k = s.k, args.block_size = s.block, args.blocks = (s.k + s.block - 1) / s.block;
  args.a = a.data();
  args.constant_weights = true;
  return args;
}

// The dense path's row for `args` (cuda::DequantizedMatMul: B dequantised into a workspace, then
// cuBLASLt), timed like the GEMV kernels into `y`.
Row measure_dense(const Shape2& s, const cuda::MatMulNBits4Args& args, const WeightCopies& weights,
                  const cuda::DeviceBuffer& y, cudaStream_t stream) {
  Row row{"gemm", s, args.m, "dense", NAN, static_cast<double>(weights.set_bytes), false, false, 1, NAN, ""};
  Result<cuda::DequantizedMatMul> dense = cuda::DequantizedMatMul::plan(args, weights.bits, false);
  Result<double> us = dense.status();
  if (dense.is_ok()) {
    Result<cuda::DeviceBuffer> workspace = cuda::DeviceBuffer::allocate(std::max<size_t>(dense->workspace_bytes(), 16));
    us = workspace.status();
    if (workspace.is_ok()) {
      cuda::MatMulNBits4Args bound = args;
      bound.y = y.data();
      us = time_launches(bound, weights, stream, 1, [&](const cuda::MatMulNBits4Args& a, cudaStream_t st) {
        return dense->run(a, workspace->data(), st);
      });
    }
  }
  if (us.is_ok()) {
    row.us = *us;
  } else {
    row.error = us.status().message();
    std::fprintf(stderr, "cuda_bench: gemm K=%lld N=%lld M=%lld dense: %s\n", static_cast<long long>(s.k),
                 static_cast<long long>(s.n), static_cast<long long>(args.m), row.error.c_str());
  }
  return row;
}

// The weight copies in the int4 GEMM's layout (pack_int4_gemm_weights on the first copy's bytes,
// then device copies of the result): as many as `w` has, so every launch streams from DRAM.
std::vector<cuda::Int4GemmWeights> make_int4_gemm_copies(const Shape2& s, const WeightCopies& w, cudaStream_t stream) {
  const int64_t blocks = (s.k + s.block - 1) / s.block;
  std::vector<uint8_t> codes(static_cast<size_t>(s.n * blocks * s.block / 2));
  std::vector<uint16_t> scales(static_cast<size_t>(s.n * blocks));
  BENCH_CHECK(cuda::copy_to_host(codes.data(), w.codes[0].data(), codes.size(), stream));
  BENCH_CHECK(cuda::copy_to_host(scales.data(), w.scales[0].data(), scales.size() * 2, stream));
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  std::vector<cuda::Int4GemmWeights> copies;
  copies.reserve(w.codes.size());  // `first` stays where it is
  copies.push_back(value_or_exit(
      cuda::pack_int4_gemm_weights(DType::kF16, s.n, s.k, s.block, codes.data(), scales.data(), nullptr)));
  const cuda::Int4GemmWeights& first = copies[0];
  const auto* first_base = static_cast<const uint8_t*>(first.memory.data());
  for (size_t c = 1; c < w.codes.size(); ++c) {
    cuda::Int4GemmWeights copy;
    copy.memory = value_or_exit(cuda::DeviceBuffer::allocate(first.memory.bytes()));
    BENCH_CHECK(cuda::copy_on_device(copy.memory.data(), first.memory.data(), first.memory.bytes(), stream));
    auto* base = static_cast<uint8_t*>(copy.memory.data());
    copy.codes = base + (first.codes - first_base);
    copy.scales = base + (static_cast<const uint8_t*>(first.scales) - first_base);
    copy.dtype = first.dtype, copy.n = first.n, copy.k = first.k, copy.block_size = first.block_size;
    copy.blocks = first.blocks, copy.n16 = first.n16;
    copies.push_back(std::move(copy));
  }
  return copies;
}

// The int4 GEMM at M rows over the copies (tile / splits 0: the planner's), into `y`, checked
// against `reference`.
Row measure_int4_gemm(const Shape2& s, int64_t m, const char* name, int tile, int splits,
                      const std::vector<cuda::Int4GemmWeights>& copies, const cuda::DeviceBuffer& a,
                      const cuda::DeviceBuffer& y, const cuda::DeviceBuffer& reference, double weight_bytes,
                      cudaStream_t stream) {
  Row row{"gemm", s, m, name, NAN, weight_bytes, true, false, 1, NAN, ""};
  const Result<cuda::Int4GemmPlan> plan = cuda::plan_int4_gemm(copies[0], m, tile, splits);
  Result<double> us = plan.status();
  if (plan.is_ok()) {
    Result<cuda::DeviceBuffer> workspace = cuda::DeviceBuffer::allocate(std::max<size_t>(plan->workspace_bytes, 16));
    us = workspace.status();
    if (workspace.is_ok()) {
      const Result<double> ms = replay_ms(stream, [&]() -> Status {
        for (const cuda::Int4GemmWeights& w : copies) {
          OG_RETURN_IF_ERROR(cuda::launch_int4_gemm(*plan, w, a.data(), nullptr, y.data(), workspace->data(), stream));
        }
        return Status::ok();
      });
      us = ms.is_ok() ? Result<double>(*ms * 1e3 / static_cast<double>(copies.size())) : ms;
    }
  }
  if (us.is_ok()) {
    row.us = *us;
    row.block_k_splits = plan->splits, row.tile = plan->config + 1;
    row.difference = relative_difference(y, reference, static_cast<size_t>(m * s.n), stream);
  } else {
    row.error = us.status().message();
    std::fprintf(stderr, "cuda_bench: gemm K=%lld N=%lld M=%lld %s: %s\n", static_cast<long long>(s.k),
                 static_cast<long long>(s.n), static_cast<long long>(m), name, row.error.c_str());
  }
  return row;
}

// cuBLASLt on the dense f16 weights alone (dequantised once beforehand): the fp16 tensor-core
// throughput the int4 GEMM is held against at M >= 256. Four products per replayed graph.
Row measure_cublas_f16(const Shape2& s, const cuda::MatMulNBits4Args& args, const WeightCopies& weights,
                       const cuda::DeviceBuffer& y, cudaStream_t stream) {
  Row row{"gemm", s, args.m, "cublas-f16", NAN, 2.0 * static_cast<double>(s.n * s.k), false, false, 1, NAN, ""};
  const cuda::DeviceBuffer dense = value_or_exit(cuda::DeviceBuffer::allocate(static_cast<size_t>(s.n * s.k) * 2));
  cuda::MatMulNBits4Args bound = args;
  bound.b = static_cast<const uint8_t*>(weights.codes[0].data());
  bound.scales = weights.scales[0].data();
  BENCH_CHECK(cuda::launch_dequantize_nbits(bound, 4, dense.data(), stream));
  const cuda::GemmProblem problem{.dtype = DType::kF16, .m = args.m, .n = s.n, .k = s.k, .trans_b = true};
  Result<std::unique_ptr<cuda::CublasLtGemm>> gemm = cuda::CublasLtGemm::plan(problem);
  Result<double> us = gemm.status();
  if (gemm.is_ok()) {
    Result<cuda::DeviceBuffer> workspace = cuda::DeviceBuffer::allocate(std::max<size_t>((*gemm)->workspace_bytes(), 16));
    us = workspace.status();
    if (workspace.is_ok()) {
      const Result<double> ms = replay_ms(stream, [&]() -> Status {
        for (int i = 0; i < 4; ++i) OG_RETURN_IF_ERROR((*gemm)->run(args.a, dense.data(), y.data(), workspace->data(), stream));
        return Status::ok();
      });
      us = ms.is_ok() ? Result<double>(*ms * 1e3 / 4) : ms;
    }
  }
  if (us.is_ok()) {
    row.us = *us;
  } else {
    row.error = us.status().message();
  }
  return row;
}

// Many rows (M = 16..512: batches of decodes, a long verify, the serving engine's steps) for one
// weight shape: the dense path (the reference output), cuBLASLt on f16 weights, the int4 GEMM
// as planned and in other tiles / splits, up to 64 rows the tensor-core kernel (its many-row form
// past 16) as planned and at each forced split of K; and M = 1 as planned, the cost of one row.
void bench_many_rows(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng, std::vector<Row>& rows) {
  const WeightCopies weights = make_weight_copies(s, l2_bytes, stream, rng);
  const std::vector<cuda::Int4GemmWeights> packed = make_int4_gemm_copies(s, weights, stream);
  for (int64_t m : {int64_t{1}, int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}, int64_t{512}}) {
    const cuda::DeviceBuffer a = random_activations(m, s.k, stream, rng);
    const size_t outputs = static_cast<size_t>(m * s.n);
    const cuda::DeviceBuffer reference = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    const cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    rows.push_back(measure_dense(s, f16_args(m, s.n, s, a), weights, reference, stream));
    if (m > 1) {
      rows.push_back(measure_cublas_f16(s, f16_args(m, s.n, s, a), weights, y, stream));
      const auto bytes = static_cast<double>(weights.set_bytes);
      rows.push_back(measure_int4_gemm(s, m, "int4-gemm", 0, 0, packed, a, y, reference, bytes, stream));
      if (m <= 64) {
        for (const auto& [name, splits] : {std::pair{"int4-gemm/ks1", 1}, std::pair{"int4-gemm/ks2", 2},
                                           std::pair{"int4-gemm/ks4", 4}}) {
          rows.push_back(measure_int4_gemm(s, m, name, 0, splits, packed, a, y, reference, bytes, stream));
        }
      } else {
        rows.push_back(measure_int4_gemm(s, m, "int4-gemm/t4", 4, 0, packed, a, y, reference, bytes, stream));
        rows.push_back(measure_int4_gemm(s, m, "int4-gemm/t5", 5, 0, packed, a, y, reference, bytes, stream));
      }
    }
    for (const Variant& v : kVariants) {
      const bool tensor_core = v.choice.kernel == K4::kTensorCore || v.choice.kernel == K4::kAuto;
      if (!tensor_core || !v.choice.dependent_launch || (m == 1 && v.choice.kernel != K4::kAuto) || m > 64) continue;
      rows.push_back(measure("gemm", s, f16_args(m, s.n, s, a), v.name, v.choice, weights, y, &reference, outputs,
                             stream));
    }
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

// Times M = 1 and M = 8 with every variant for one weight shape, against the CUDA-core output.
void bench_shape(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng, std::vector<Row>& rows) {
  const WeightCopies weights = make_weight_copies(s, l2_bytes, stream, rng);
  for (int64_t m : {int64_t{1}, int64_t{8}}) {
    const cuda::DeviceBuffer a = random_activations(m, s.k, stream, rng);
    const size_t outputs = static_cast<size_t>(m * s.n);
    const cuda::DeviceBuffer reference = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    const cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    for (const Variant& v : kVariants) {
      const bool first = &v == &kVariants[0];
      rows.push_back(measure(s.bits == 8 ? "gemv8" : "gemv", s, f16_args(m, s.n, s, a), v.name, v.choice, weights,
                             first ? reference : y, first ? nullptr : &reference, outputs, stream));
    }
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

// A decoder MLP's gate and up projections at M = 1 and 8, their 2N rows in one buffer (gate's
// then up's for the separate launches; interleaved for the fused one: the same bytes either
// way): the two GEMVs of the unfused graph (without its three elementwise kernels), planned,
// against one launch with the SwiGLU epilogue (onnx_genai MatMulNBitsSwiGLU) in every
// tensor-core variant, each checked against the fused standard-ring kernel's output.
void bench_gate_up(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng, std::vector<Row>& rows) {
  const WeightCopies weights = make_weight_copies(Shape2{s.k, 2 * s.n, s.block}, l2_bytes, stream, rng);
  for (int64_t m : {int64_t{1}, int64_t{8}}) {
    const cuda::DeviceBuffer a = random_activations(m, s.k, stream, rng);
    const size_t outputs = static_cast<size_t>(m * s.n);
    const cuda::DeviceBuffer unfused = value_or_exit(cuda::DeviceBuffer::allocate(2 * outputs * 2));
    const cuda::DeviceBuffer reference = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    const cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2));
    rows.push_back(measure("gate_up", s, f16_args(m, s.n, s, a), "two GEMVs", {}, weights, unfused, nullptr, 0,
                           stream, 2));
    cuda::MatMulNBits4Args fused = f16_args(m, 2 * s.n, s, a);
    fused.epilogue = cuda::MatMulNBits4Epilogue::kSwiGLU;
    for (const Variant& v : kVariants) {
      if (v.choice.kernel == K4::kCudaCore) continue;
      const bool first = v.choice.kernel == K4::kTensorCore && v.choice.block_k_splits == 0;
      rows.push_back(measure("gate_up", s, fused, v.name, v.choice, weights, first ? reference : y,
                             first ? nullptr : &reference, outputs, stream));
    }
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

double fraction_of_copy(const Row& r, double copy_bw) { return r.weight_bytes / (r.us * 1e-6) / copy_bw; }

bool same_case(const Row& a, const Row& b) {
  return std::string(a.group) == b.group && a.shape.k == b.shape.k && a.shape.n == b.shape.n &&
         a.shape.block == b.shape.block && a.m == b.m;
}

// The row of `variant` in the case of `r` at M = `m` (nullptr if none ran).
const Row* find_row(const std::vector<Row>& rows, const Row& r, int64_t m, const std::string& variant) {
  for (const Row& o : rows) {
    if (o.m == m && variant == o.variant && !std::isnan(o.us) && std::string(o.group) == r.group &&
        o.shape.k == r.shape.k && o.shape.n == r.shape.n && o.shape.block == r.shape.block) {
      return &o;
    }
  }
  return nullptr;
}

// "time (fraction of copy, K splits)" of a variant, or "-".
std::string cell(const std::vector<Row>& rows, const Row& r, const char* variant, double copy_bw) {
  const Row* o = find_row(rows, r, r.m, variant);
  if (o == nullptr) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f (%.2f, ks%d)", o->us, fraction_of_copy(*o, copy_bw), o->block_k_splits);
  return text;
}

// One line per (group, shape, M): the planned variants, the fastest of all and, at M = 8, its
// time over the M = 1 one of the same variant.
void print_summary(const std::vector<Row>& rows, double copy_bw) {
  std::printf("| what | K | N | block | M | cuda-core / two GEMVs | planned | tc | tc/serial | deep | best | "
              "best time (of copy) | best M=8/M=1 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if ((i > 0 && same_case(rows[i - 1], r)) || std::string(r.group) == "gemm") continue;  // print_many_rows
    const Row* best = nullptr;
    for (size_t j = i; j < rows.size() && same_case(rows[j], r); ++j) {
      const bool fused_or_single = std::string(rows[j].variant) != "two GEMVs";
      if (!std::isnan(rows[j].us) && fused_or_single && (best == nullptr || rows[j].us < best->us)) best = &rows[j];
    }
    const bool gate_up = std::string(r.group) == "gate_up";
    std::string ratio;
    if (best != nullptr && r.m == 8) {
      if (const Row* one = find_row(rows, r, 1, best->variant)) ratio = std::to_string(best->us / one->us).substr(0, 4);
    }
    std::printf("| %s | %lld | %lld | %lld | %lld | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.group,
                static_cast<long long>(r.shape.k), static_cast<long long>(r.shape.n),
                static_cast<long long>(r.shape.block), static_cast<long long>(r.m),
                cell(rows, r, gate_up ? "two GEMVs" : "cuda-core", copy_bw).c_str(),
                cell(rows, r, "planned", copy_bw).c_str(), cell(rows, r, "tc", copy_bw).c_str(), cell(rows, r, "tc/serial", copy_bw).c_str(),
                cell(rows, r, "deep", copy_bw).c_str(), best != nullptr ? best->variant : "-",
                best != nullptr ? cell(rows, r, best->variant, copy_bw).c_str() : "-", ratio.c_str());
  }
}

// One line per (shape, M > 1) of the many-row group: what the op runs (the planned tensor-core
// kernel, or the dense path where the plan declines it), the fastest tensor-core variant and the
// dense path, and the op's time over the planned M = 1 time.
void print_many_rows(const std::vector<Row>& rows, double copy_bw) {
  bool header = false;
  for (const Row& r : rows) {
    if (std::string(r.group) != "gemm" || r.m == 1 || std::string(r.variant) != "dense") continue;
    if (!header) {
      std::printf("\n| many rows | K | N | block | M | the op runs | best tensor-core | dense | op / M=1 | dense / op "
                  "|\n|---|---|---|---|---|---|---|---|---|---|\n");
      header = true;
    }
    const Row* best = nullptr;
    for (const Row& o : rows) {
      const std::string v = o.variant;
      const bool int4_kernel = v != "dense" && v != "cublas-f16";
      if (same_case(o, r) && int4_kernel && !std::isnan(o.us) && (best == nullptr || o.us < best->us)) {
        best = &o;
      }
    }
    const Row* planned = find_row(rows, r, r.m, "planned");
    const Row* op = planned != nullptr && planned->tensor_core ? planned : &r;
    const Row* one = find_row(rows, r, 1, "planned");
    char per_row[32] = "-", dense_ratio[32] = "-";
    if (one != nullptr && !std::isnan(op->us)) std::snprintf(per_row, sizeof per_row, "%.2f", op->us / one->us);
    if (!std::isnan(op->us) && !std::isnan(r.us)) std::snprintf(dense_ratio, sizeof dense_ratio, "%.2f", r.us / op->us);
    std::printf("| gemm | %lld | %lld | %lld | %lld | %s %s | %s %s | %s | %s | %s |\n", static_cast<long long>(r.shape.k),
                static_cast<long long>(r.shape.n), static_cast<long long>(r.shape.block), static_cast<long long>(r.m),
                op->variant, cell(rows, r, op->variant, copy_bw).c_str(), best != nullptr ? best->variant : "-",
                best != nullptr ? cell(rows, r, best->variant, copy_bw).c_str() : "-",
                cell(rows, r, "dense", copy_bw).c_str(), per_row, dense_ratio);
  }
}

// One line per (shape, M > 1) of the many-row group for the int4 GEMM: its planned time, the
// previous path (the many-row / small-M tensor-core kernel where its rule planned it, else the
// dense path), the fastest int4 GEMM variant, cuBLASLt on f16 weights, and the ratios against the
// two targets (copy bandwidth; cuBLAS's fp16 TFLOP/s).
void print_int4_gemm(const std::vector<Row>& rows, double copy_bw) {
  bool header = false;
  for (const Row& r : rows) {
    if (std::string(r.group) != "gemm" || std::string(r.variant) != "int4-gemm" || std::isnan(r.us)) continue;
    if (!header) {
      std::printf("\n| int4 GEMM | K | N | M | int4 GEMM us (of copy, tile, splits) | previous path us (of copy) | "
                  "speed-up | best int4 variant | cuBLAS f16 us | int4 / cuBLAS f16 TFLOP/s |\n"
                  "|---|---|---|---|---|---|---|---|---|---|\n");
      header = true;
    }
    const Row* planned = find_row(rows, r, r.m, "planned");
    const Row* dense = find_row(rows, r, r.m, "dense");
    const Row* previous = planned != nullptr && planned->tensor_core ? planned : dense;
    const Row* cublas = find_row(rows, r, r.m, "cublas-f16");
    const Row* best = &r;
    for (const Row& o : rows) {
      if (same_case(o, r) && std::string(o.variant).rfind("int4-gemm", 0) == 0 && !std::isnan(o.us) && o.us < best->us) {
        best = &o;
      }
    }
    const double flops = 2.0 * static_cast<double>(r.m * r.shape.n * r.shape.k);
    char prev[64] = "-", speed[16] = "-", blas[32] = "-", ratio[48] = "-";
    if (previous != nullptr) {
      std::snprintf(prev, sizeof prev, "%s %.2f (%.2f)", previous->variant, previous->us, fraction_of_copy(*previous, copy_bw));
      std::snprintf(speed, sizeof speed, "%.2f", previous->us / r.us);
    }
    if (cublas != nullptr) {
      std::snprintf(blas, sizeof blas, "%.2f", cublas->us);
      std::snprintf(ratio, sizeof ratio, "%.0f / %.0f = %.2f", flops / r.us * 1e-6, flops / cublas->us * 1e-6,
                    cublas->us / r.us);
    }
    std::printf("| gemm | %lld | %lld | %lld | %.2f (%.2f, t%d, ks%d) | %s | %s | %s %.2f | %s | %s |\n",
                static_cast<long long>(r.shape.k), static_cast<long long>(r.shape.n), static_cast<long long>(r.m), r.us,
                fraction_of_copy(r, copy_bw), r.tile, r.block_k_splits, prev, speed, best->variant, best->us, blas, ratio);
  }
}

void write_json(const std::vector<Row>& rows, const std::vector<AttentionRow>& prompts, const cuda::DeviceInfo& device,
                double copy_bw, std::ofstream& json) {
  json << "{\n  \"device\": \"" << device.to_string() << "\",\n  \"copy_bandwidth_gbs\": " << copy_bw / 1e9
       << ",\n  \"activations\": \"f16\",\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << "    {\"group\": \"" << r.group << "\", \"k\": " << r.shape.k << ", \"n\": " << r.shape.n
         << ", \"block\": " << r.shape.block << ", \"m\": " << r.m << ", \"variant\": \"" << r.variant
         << "\", \"us\": " << json_number(r.us) << ", \"weight_bytes\": " << r.weight_bytes
         << ", \"fraction_of_copy\": " << json_number(fraction_of_copy(r, copy_bw))
         << ", \"tensor_core\": " << (r.tensor_core ? "true" : "false")
         << ", \"deep_ring\": " << (r.deep_ring ? "true" : "false")
         << ", \"block_k_splits\": " << r.block_k_splits << ", \"tile\": " << r.tile
         << ", \"difference\": " << json_number(r.difference) << ", \"error\": \"" << r.error << "\"}"
         << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "  ],\n  \"attention\": [\n";
  for (size_t i = 0; i < prompts.size(); ++i) {
    const AttentionRow& r = prompts[i];
    json << "    {\"case\": \"" << r.name << "\", \"variant\": \"" << r.variant << "\", \"us\": " << json_number(r.us)
         << ", \"tflops\": " << json_number(r.tflops) << ", \"kv_gbs\": " << json_number(r.gbs) << ", \"difference\": " << json_number(r.difference)
         << ", \"error\": \"" << r.error << "\"}" << (i + 1 < prompts.size() ? ",\n" : "\n");
  }
  json << "  ]\n}\n";
}

int run(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "cuda_bench.json";
  const std::string only = argc > 2 ? argv[2] : "";
  const auto selected = [&](const char* group, const Shape2& s) {
    const std::string name = std::string(group) + " " + std::to_string(s.k) + "x" + std::to_string(s.n) + "/b" +
                             std::to_string(s.block);
    return name.find(only) != std::string::npos;
  };
  const cuda::DeviceInfo device = value_or_exit(cuda::usable_device(0));
  cudaStream_t stream;
  BENCH_CHECK(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  const double copy_bw = copy_bandwidth(stream);
  std::mt19937 rng(7);
  std::vector<Row> rows;
  for (const Shape2 base : {Shape2{4096, 4096, 0}, Shape2{4096, 14336, 0}, Shape2{14336, 4096, 0},
                            Shape2{3584, 4608, 0}, Shape2{3584, 3584, 0}, Shape2{18944, 3584, 0},
                            Shape2{896, 151936, 0}}) {
    for (int64_t block : {int64_t{32}, int64_t{128}}) {
      const Shape2 s{base.k, base.n, block};
      if (selected("gemv", s)) bench_shape(s, device.l2_bytes, stream, rng, rows);
    }
  }
  for (const Shape2 qwen :
       {Shape2{896, 1152, 32}, Shape2{896, 896, 32}, Shape2{896, 4864, 32}, Shape2{4864, 896, 32}}) {
    if (selected("gemv", qwen)) bench_shape(qwen, device.l2_bytes, stream, rng, rows);
  }
  for (const Shape2 mlp : {Shape2{896, 4864, 32}, Shape2{3584, 18944, 32}, Shape2{3584, 18944, 128}}) {
    if (selected("gate_up", mlp)) bench_gate_up(mlp, device.l2_bytes, stream, rng, rows);
  }
  for (const Shape2 s : {Shape2{3584, 18944, 32}, Shape2{18944, 3584, 32}, Shape2{3584, 3584, 32},
                         Shape2{4096, 14336, 32}, Shape2{896, 4864, 32}, Shape2{4864, 896, 32}, Shape2{3584, 4608, 32},
                         Shape2{3584, 37888, 32}, Shape2{3584, 37888, 128}, Shape2{896, 1152, 32}, Shape2{896, 9728, 32}}) {
    if (selected("gemm", s)) bench_many_rows(s, device.l2_bytes, stream, rng, rows);
  }
  for (const Shape2 base : {Shape2{3584, 18944, 0}, Shape2{18944, 3584, 0}, Shape2{4096, 4096, 0}}) {
    for (int64_t block : {int64_t{32}, int64_t{128}}) {
      const Shape2 s{base.k, base.n, block, 8};
      if (selected("gemv8", s)) bench_shape(s, device.l2_bytes, stream, rng, rows);
    }
  }
  std::vector<AttentionRow> prompts;
  bench_attention(only, stream, rng, prompts);
  std::vector<MoERow> moe;
  bench_moe(only, stream, rng, moe);
  cudaStreamDestroy(stream);

  std::printf("device: %s\ncopy bandwidth (read + write): %.0f GB/s\n\n", device.to_string().c_str(), copy_bw / 1e9);
  std::printf("f16, no zero points; cells: time in us (weights read / copy bandwidth, K splits); gate_up: N is\n"
              "the output width, weights 2N x K, the variants fused with SwiGLU; gemv8: 8-bit codes; every\n"
              "variant in the JSON.\n\n");
  if (!rows.empty()) print_summary(rows, copy_bw);
  print_many_rows(rows, copy_bw);
  print_int4_gemm(rows, copy_bw);
  print_attention(prompts);
  print_moe(moe, copy_bw);
  // Every variant computes what the reference kernel does: f32 accumulation in another order (the
  // flash kernel also rounds probabilities to f16 for its P.V product).
  double worst = 0;
  for (const Row& r : rows) worst = std::isnan(r.difference) ? worst : std::max(worst, r.difference);
  for (const AttentionRow& r : prompts) worst = std::isnan(r.difference) ? worst : std::max(worst, r.difference);
  std::printf("\noutputs against the reference kernel's: worst max|y - ref| / max|ref| = %.3g%s\n", worst,
              worst > 1e-2 ? "  <-- MISMATCH" : "");
  std::ofstream json(json_path);
  write_json(rows, prompts, device, copy_bw, json);
  return json ? 0 : 1;
}

}  // namespace
}  // namespace onnx_genai

int main(int argc, char** argv) { return onnx_genai::run(argc, argv); }
