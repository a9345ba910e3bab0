// Helpers shared by cuda_bench's parts (cuda_bench.cc: MatMulNBits; cuda_attention.cc: the
// attention kernels): exit-on-error checks, CUDA-graph timing, random f16 data, output checks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/memory.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

inline constexpr int kReps = 15;
inline constexpr int kWarmup = 3;

#define BENCH_CHECK(expr)                                                                        \
  do {                                                                                           \
    if (Status og_s = (expr); !og_s.is_ok()) {                                                   \
      std::fprintf(stderr, "cuda_bench: %s\n", og_s.message().c_str());                        \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

Status check(cudaError_t err, const char* what);

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

// JSON has no NaN: a failed measurement is null.
std::string json_number(double v);

std::vector<uint16_t> random_f16(size_t count, std::mt19937& rng, float lo, float hi);

// Milliseconds per replay (the median) of a CUDA graph of what `queue` launches on `stream`: no
// launch gaps in the timing, and a check that the kernels are capture-safe. A failed launch ends
// the capture and comes back as the error.
Result<double> replay_ms(cudaStream_t stream, const std::function<Status()>& queue);

// max |y - reference| / max |reference| over two f16 device outputs of `count` values.
double relative_difference(const cuda::DeviceBuffer& y, const cuda::DeviceBuffer& reference, size_t count,
                           cudaStream_t stream);

// ---- cuda_attention.cc ----

// One attention case on one kernel: time, TFLOP/s of the attention products, KV bytes read per
// second (paged decodes), and the output's difference from the reference kernel's.
struct AttentionRow {
  std::string name;
  const char* variant;  // the reference kernel's first, then the planner's
  double us = NAN, tflops = NAN, gbs = NAN;
  double difference = NAN;  // max |y - ref| / max |ref|, NaN for the reference
  std::string error;
};

// Runs the attention cases whose name contains `only` (GroupQueryAttention prompts on the tiled
// and the flash kernel; PagedAttention serving steps on the CUDA-core and the tensor-core kernel).
void bench_attention(const std::string& only, cudaStream_t stream, std::mt19937& rng, std::vector<AttentionRow>& rows);
// Markdown tables of the rows (pairs: reference, planned).
void print_attention(const std::vector<AttentionRow>& rows);

// ---- cuda_moe.cc ----

// One MoE layer at one token count: time per layer, how many experts the routing chose (mean
// over the copies) and their bytes.
struct MoERow {
  std::string name;
  int64_t tokens = 0;
  double us = NAN, experts_read = NAN, active_bytes = NAN;
  std::string error;
};

// Runs the MoE layers whose "moe MODEL FORMAT" name contains `only`.
void bench_moe(const std::string& only, cudaStream_t stream, std::mt19937& rng, std::vector<MoERow>& rows);
// A markdown table: time, and the chosen experts' bytes per second against the copy bandwidth.
void print_moe(const std::vector<MoERow>& rows, double copy_bw);

}  // namespace onnx_genai
