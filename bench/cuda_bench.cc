// MatMulNBits (4-bit) GEMV / small-M GEMM on the GPU against the device's measured copy
// bandwidth (the roofline of a kernel that streams its weights once).
//
//   cuda_bench [json_path]     (default cuda_bench.json; a markdown table goes to stdout)
//
// For each (K, N, block) at M = 1 and M = 8, f16 activations and scales, no zero points, and each
// kernel (old: the CUDA-core kernel, forced; new: what the plan picks, the tensor-core kernel for
// M <= 16): time with CUDA events over replays of a CUDA graph of launches (warm-up first, median
// of kReps replays), each launch reading a different copy of the weights so that the set of
// copies is several times the L2 and every launch streams from DRAM. Reports the weight bytes
// (codes + scales) read per second, that as a fraction of a device-to-device copy measured in the
// same run (bytes read + bytes written), time(M=8) / time(M=1) per kernel (1.0 would mean
// M=8 costs what M=1 costs) and the warps the new kernel's plan splits K between. Shapes: Llama-3-8B-like projections (4096 / 14336), a 152k-row
// vocabulary head (K = 896), and Qwen2.5-0.5B's decode projections (q+k+v 896 x 1152, o 896 x
// 896, gate/up 896 x 4864, down 4864 x 896). Then a decoder MLP's gate and up at M = 1 (Qwen2.5
// 0.5B and 7B), as two GEMVs and fused with the SwiGLU epilogue.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/device.h"
#include "core/cuda/memory.h"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "onnx_genai/dtype.h"

namespace onnx_genai {
namespace {

constexpr int kReps = 15;
constexpr int kWarmup = 3;

#define BENCH_CHECK(expr)                                                                        \
  do {                                                                                           \
    if (Status og_s = (expr); !og_s.is_ok()) {                                                   \
      std::fprintf(stderr, "cuda_bench: %s\n", og_s.message().c_str());                        \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return OG_ERROR(what, ": ", cudaGetErrorString(err));
}

template <typename T>
T value_or_exit(Result<T> r) {
  BENCH_CHECK(r.status());
  return std::move(r).value();
}

// Median over kReps of the milliseconds `batch` takes, after kWarmup untimed batches.
template <typename F>
double median_ms(cudaStream_t stream, F&& batch) {
  cudaEvent_t start, stop;
  BENCH_CHECK(check(cudaEventCreate(&start), "cudaEventCreate"));
  BENCH_CHECK(check(cudaEventCreate(&stop), "cudaEventCreate"));
  for (int i = 0; i < kWarmup; ++i) batch();
  std::vector<double> times;
  for (int i = 0; i < kReps; ++i) {
    BENCH_CHECK(check(cudaEventRecord(start, stream), "cudaEventRecord"));
    batch();
    BENCH_CHECK(check(cudaEventRecord(stop, stream), "cudaEventRecord"));
    BENCH_CHECK(check(cudaEventSynchronize(stop), "cudaEventSynchronize"));
    float ms = 0;
    BENCH_CHECK(check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime"));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

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
};

struct Row {
  Shape2 shape;
  int64_t m;
  const char* kernel;  // "old" / "new"
  double us;           // NaN when the kernel failed
  double weight_bytes;
  int block_k_splits;   // the new kernel's split of K between warps (1 for the old one)
  double difference;   // new vs old output: max |new - old| / max |old|; NaN for old
  std::string error;
};

struct KernelChoice {
  const char* name;
  cuda::MatMulNBits4Kernel kernel;
};
constexpr KernelChoice kKernels[] = {{"old", cuda::MatMulNBits4Kernel::kCudaCore},
                                     {"new", cuda::MatMulNBits4Kernel::kAuto}};

// JSON has no NaN: a failed measurement is null.
std::string json_number(double v) {
  if (std::isnan(v)) return "null";
  std::ostringstream out;
  out << v;
  return out.str();
}

std::vector<uint16_t> random_f16(size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = Float16(dist(rng)).bits;
  return out;
}

// Copies of one weight set (codes and f16 scales of N rows) covering 4x the L2, so no launch
// finds its weights cached.
struct WeightCopies {
  std::vector<cuda::DeviceBuffer> codes, scales;
  size_t set_bytes = 0;
};

WeightCopies make_weight_copies(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng) {
  const int64_t blocks = (s.k + s.block - 1) / s.block;
  const size_t code_bytes = static_cast<size_t>(s.n * blocks * s.block / 2);
  const size_t scale_bytes = static_cast<size_t>(s.n * blocks) * 2;
  WeightCopies w;
  w.set_bytes = code_bytes + scale_bytes;
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

// Microseconds per launch group of `args` over the weight copies: per copy, `parts` launches on
// consecutive slices of args.n rows (separate projections in one buffer), captured once as a
// CUDA graph and replayed (no launch gaps in the timing, and a check that the kernel is
// capture-safe). A failed launch ends the capture and comes back as the error.
Result<double> time_launches(cuda::MatMulNBits4Args args, const WeightCopies& w, cudaStream_t stream, int parts = 1) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  OG_RETURN_IF_ERROR(check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  Status launched = Status::ok();
  const int64_t slice_codes = args.n * args.blocks * args.block_size / 2, slice_scales = args.n * args.blocks * 2;
  for (size_t c = 0; c < w.codes.size() && launched.is_ok(); ++c) {
    for (int part = 0; part < parts && launched.is_ok(); ++part) {
      args.b = static_cast<const uint8_t*>(w.codes[c].data()) + part * slice_codes;
      args.scales = static_cast<const char*>(w.scales[c].data()) + part * slice_scales;
      launched = cuda::launch_matmul_nbits4(args, stream);
    }
  }
  const Status captured = check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  if (!launched.is_ok() || !captured.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // the launch error is reported, not left for the next call
    return launched.is_ok() ? captured : launched;
  }
  OG_RETURN_IF_ERROR(check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"));
  const double ms = median_ms(stream, [&] { BENCH_CHECK(check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch")); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms * 1e3 / static_cast<double>(w.codes.size());
}

// max |y - reference| / max |reference| over two f16 device outputs of `count` values.
double relative_difference(const cuda::DeviceBuffer& y, const cuda::DeviceBuffer& reference, size_t count,
                           cudaStream_t stream) {
  std::vector<uint16_t> got(count), want(count);
  BENCH_CHECK(cuda::copy_to_host(got.data(), y.data(), count * 2, stream));
  BENCH_CHECK(cuda::copy_to_host(want.data(), reference.data(), count * 2, stream));
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < count; ++i) {
    const double g = Float16::to_float(got[i]), w = Float16::to_float(want[i]);
    diff = std::max(diff, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  return scale > 0 ? diff / scale : diff;
}

// Times M = 1 and M = 8 with each kernel for one weight shape; appends four rows. The new
// kernel's output is checked against the old one's on the same inputs.
void bench_shape(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng, std::vector<Row>& rows) {
  const int64_t blocks = (s.k + s.block - 1) / s.block;
  const WeightCopies weights = make_weight_copies(s, l2_bytes, stream, rng);
  const size_t set_bytes = weights.set_bytes;
  for (int64_t m : {int64_t{1}, int64_t{8}}) {
    const std::vector<uint16_t> host_a = random_f16(static_cast<size_t>(m * s.k), rng, -1.0f, 1.0f);
    const size_t outputs = static_cast<size_t>(m * s.n);
    cuda::DeviceBuffer a = value_or_exit(cuda::DeviceBuffer::allocate(host_a.size() * 2));
    BENCH_CHECK(cuda::copy_to_device(a.data(), host_a.data(), host_a.size() * 2, stream));
    std::vector<cuda::DeviceBuffer> y;
    for (const KernelChoice& choice : kKernels) {
      y.push_back(value_or_exit(cuda::DeviceBuffer::allocate(outputs * 2)));
      cuda::MatMulNBits4Args args;
      args.dtype = DType::kF16;
      args.m = m, args.n = s.n, args.k = s.k, args.block_size = s.block, args.blocks = blocks;
      Row row{s, m, choice.name, NAN, static_cast<double>(set_bytes), 1, NAN, ""};
      const Status planned = cuda::plan_matmul_nbits4(args, choice.kernel);
      args.a = a.data();
      args.y = y.back().data();
      const Result<double> us = planned.is_ok() ? time_launches(args, weights, stream) : Result<double>(planned);
      if (us.is_ok()) {
        row.us = *us;
        row.block_k_splits = args.block_k_splits;
        if (y.size() > 1) row.difference = relative_difference(y.back(), y.front(), outputs, stream);
      } else {
        row.error = us.status().message();
        std::fprintf(stderr, "cuda_bench: K=%lld N=%lld M=%lld %s: %s\n", static_cast<long long>(s.k),
                     static_cast<long long>(s.n), static_cast<long long>(m), choice.name, row.error.c_str());
      }
      rows.push_back(row);
    }
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

// A decoder MLP's gate and up projections at M = 1, their 2N rows in one buffer (gate's then up's
// for the separate launches; interleaved for the fused one: the same bytes either way): the two
// GEMVs of the unfused graph (without its three elementwise kernels) against one launch with the
// SwiGLU epilogue (onnx_genai MatMulNBitsSwiGLU).
struct SwiGLURow {
  Shape2 shape;  // n: the output width
  const char* variant;
  double us;
  double weight_bytes;
  std::string error;
};

void bench_gate_up(const Shape2& s, int64_t l2_bytes, cudaStream_t stream, std::mt19937& rng,
                   std::vector<SwiGLURow>& rows) {
  const WeightCopies weights = make_weight_copies(Shape2{s.k, 2 * s.n, s.block}, l2_bytes, stream, rng);
  const std::vector<uint16_t> host_a = random_f16(static_cast<size_t>(s.k), rng, -1.0f, 1.0f);
  cuda::DeviceBuffer a = value_or_exit(cuda::DeviceBuffer::allocate(host_a.size() * 2));
  cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(static_cast<size_t>(2 * s.n) * 2));
  BENCH_CHECK(cuda::copy_to_device(a.data(), host_a.data(), host_a.size() * 2, stream));
  for (const bool fused : {false, true}) {
    cuda::MatMulNBits4Args args;
    args.dtype = DType::kF16;
    args.m = 1, args.n = fused ? 2 * s.n : s.n, args.k = s.k, args.block_size = s.block;
    args.blocks = (s.k + s.block - 1) / s.block;
    if (fused) args.epilogue = cuda::MatMulNBits4Epilogue::kSwiGLU;
    SwiGLURow row{s, fused ? "fused SwiGLU" : "two GEMVs", NAN, static_cast<double>(weights.set_bytes), ""};
    const Status planned = cuda::plan_matmul_nbits4(args);
    args.a = a.data();
    args.y = y.data();
    const Result<double> us = planned.is_ok() ? time_launches(args, weights, stream, fused ? 1 : 2) : Result<double>(planned);
    if (us.is_ok()) {
      row.us = *us;
    } else {
      row.error = us.status().message();
      std::fprintf(stderr, "cuda_bench: gate/up K=%lld N=%lld %s: %s\n", static_cast<long long>(s.k),
                   static_cast<long long>(s.n), row.variant, row.error.c_str());
    }
    rows.push_back(row);
  }
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

void report_gate_up(const std::vector<SwiGLURow>& rows, std::ofstream& json) {
  std::printf("\ngate + up + SwiGLU at M = 1, f16 (N: the output width; weights 2N x K):\n\n");
  std::printf("| K | N | block | variant | time (us) | weights GB/s |\n|---|---|---|---|---|---|\n");
  json << "  \"gate_up_swiglu\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SwiGLURow& r = rows[i];
    const double gbs = r.weight_bytes / (r.us * 1e-6) / 1e9;
    std::printf("| %lld | %lld | %lld | %s | %.2f | %.0f |\n", static_cast<long long>(r.shape.k),
                static_cast<long long>(r.shape.n), static_cast<long long>(r.shape.block), r.variant, r.us, gbs);
    json << "    {\"k\": " << r.shape.k << ", \"n\": " << r.shape.n << ", \"block\": " << r.shape.block
         << ", \"variant\": \"" << r.variant << "\", \"us\": " << json_number(r.us) << ", \"weights_gbs\": "
         << json_number(gbs) << ", \"error\": \"" << r.error << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "  ]\n";
}

int run(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "cuda_bench.json";
  const cuda::DeviceInfo device = value_or_exit(cuda::usable_device(0));
  cudaStream_t stream;
  BENCH_CHECK(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  const double copy_bw = copy_bandwidth(stream);
  std::mt19937 rng(7);
  std::vector<Row> rows;
  for (const Shape2 base : {Shape2{4096, 4096, 0}, Shape2{4096, 14336, 0}, Shape2{14336, 4096, 0}, Shape2{896, 151936, 0}}) {
    for (int64_t block : {int64_t{32}, int64_t{128}}) bench_shape(Shape2{base.k, base.n, block}, device.l2_bytes, stream, rng, rows);
  }
  for (const Shape2 qwen : {Shape2{896, 1152, 32}, Shape2{896, 896, 32}, Shape2{896, 4864, 32}, Shape2{4864, 896, 32}}) {
    bench_shape(qwen, device.l2_bytes, stream, rng, rows);
  }
  std::vector<SwiGLURow> gate_up_rows;
  for (const Shape2 mlp : {Shape2{896, 4864, 32}, Shape2{3584, 18944, 32}}) {
    bench_gate_up(mlp, device.l2_bytes, stream, rng, gate_up_rows);
  }
  cudaStreamDestroy(stream);

  std::ofstream json(json_path);
  json << "{\n  \"device\": \"" << device.to_string() << "\",\n  \"copy_bandwidth_gbs\": " << copy_bw / 1e9
       << ",\n  \"activations\": \"f16\",\n  \"results\": [\n";
  std::printf("device: %s\ncopy bandwidth (read + write): %.0f GB/s\n\n", device.to_string().c_str(), copy_bw / 1e9);
  std::printf("| K | N | block | M | kernel | time (us) | weights GB/s | of copy BW | M=8 / M=1 | K splits |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double gbs = r.weight_bytes / (r.us * 1e-6) / 1e9;
    // The same shape and kernel at M = 1.
    double ratio = 1.0;
    for (const Row& one : rows) {
      if (r.m == 8 && one.m == 1 && one.shape.k == r.shape.k && one.shape.n == r.shape.n &&
          one.shape.block == r.shape.block && std::string(one.kernel) == r.kernel) {
        ratio = r.us / one.us;
      }
    }
    std::printf("| %lld | %lld | %lld | %lld | %s | %.2f | %.0f | %.2f | %s | %d |\n", static_cast<long long>(r.shape.k),
                static_cast<long long>(r.shape.n), static_cast<long long>(r.shape.block), static_cast<long long>(r.m),
                r.kernel, r.us, gbs, gbs * 1e9 / copy_bw, r.m == 8 ? std::to_string(ratio).substr(0, 4).c_str() : "",
                r.block_k_splits);
    json << "    {\"k\": " << r.shape.k << ", \"n\": " << r.shape.n << ", \"block\": " << r.shape.block << ", \"m\": " << r.m
         << ", \"kernel\": \"" << r.kernel << "\", \"us\": " << json_number(r.us) << ", \"weight_bytes\": " << r.weight_bytes
         << ", \"weights_gbs\": " << json_number(gbs) << ", \"fraction_of_copy\": " << json_number(gbs * 1e9 / copy_bw)
         << ", \"m8_over_m1\": " << json_number(ratio) << ", \"block_k_splits\": " << r.block_k_splits
         << ", \"difference_vs_old\": " << json_number(r.difference)
         << ", \"error\": \"" << r.error << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  // The new kernel computes what the old one does: f32 accumulation in another order, f16 output.
  double worst = 0;
  for (const Row& r : rows) worst = std::isnan(r.difference) ? worst : std::max(worst, r.difference);
  std::printf("\nnew vs old outputs: worst max|new - old| / max|old| = %.3g%s\n", worst,
              worst > 1e-2 ? "  <-- MISMATCH" : "");
  json << "  ],\n";
  report_gate_up(gate_up_rows, json);
  json << "}\n";
  return json ? 0 : 1;
}

}  // namespace
}  // namespace onnx_genai

int main(int argc, char** argv) { return onnx_genai::run(argc, argv); }
