// Kernel benchmark suite: single-op ONNX models run through Session, one case per model and
// thread count, e.g. `matmul/32x512x512/f32/threads:1`.
//
//   og_bench --models=DIR [Google Benchmark flags]     (or OG_BENCH_MODELS=DIR og_bench ...)
//
// DIR is written by tools/make_bench_models.py: its manifest.json names each model and the raw
// input files, which bench/ort_bench.mjs feeds to ONNX Runtime too, so both engines see the same
// bytes. scripts/bench runs the two side by side; scripts/bench-compare runs two revisions.
//
// What one iteration times: `session->run_into(inputs, outputs)` on a compiled plan, reusing the
// output tensors as a decode loop does (ONNX Runtime's timed kernels also write into reused
// buffers). The first run, which compiles the plan, happens before timing starts.
// "threads:all" means every CPU this process may run on (its affinity mask). Iterations are sized
// by wall time (UseRealTime: the main thread's CPU time undercounts a multi-threaded run), which
// makes Google Benchmark print the names with a "/real_time" suffix; the scripts drop it.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {
namespace {

struct BenchInput {
  std::string file;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
};

struct BenchCase {
  std::string name;        // without the thread suffix
  std::string model_path;  // absolute or relative to the working directory
  std::vector<BenchInput> inputs;
  double flops = 0;  // per run, 0 when not a FLOP-bound op
  double bytes = 0;  // least memory traffic per run
};

Result<DType> dtype_from_manifest(const std::string& name) {
  static const std::map<std::string, DType> kNames = {
      {"float32", DType::kF32}, {"float16", DType::kF16}, {"bfloat16", DType::kBF16}, {"int64", DType::kI64},
      {"int32", DType::kI32}};
  auto it = kNames.find(name);
  if (it == kNames.end()) return OG_ERROR("bench manifest: unknown dtype '", name, "'");
  return it->second;
}

Result<std::vector<BenchCase>> read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  if (!in) return OG_ERROR("bench manifest: cannot open ", path, " (run tools/make_bench_models.py ", dir, ")");
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.contains("cases")) return OG_ERROR("bench manifest: ", path, " is not a manifest");
  std::vector<BenchCase> cases;
  for (const auto& entry : manifest["cases"]) {
    BenchCase c{.name = entry.value("name", ""), .model_path = dir + "/" + entry.value("model", "")};
    c.flops = entry.value("flops", 0.0);
    c.bytes = entry.value("bytes", 0.0);
    for (const auto& input : entry["inputs"]) {
      OG_ASSIGN_OR_RETURN(DType dtype, dtype_from_manifest(input.value("dtype", "")));
      c.inputs.push_back({.file = dir + "/" + input.value("file", ""),
                          .dtype = dtype,
                          .shape = input.value("shape", std::vector<int64_t>{})});
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

Result<Tensor> read_input(const BenchInput& input) {
  OG_ASSIGN_OR_RETURN(Tensor tensor, Tensor::allocate(input.dtype, Shape(input.shape)));
  std::ifstream in(input.file, std::ios::binary);
  if (!in.read(static_cast<char*>(tensor.raw()), tensor.nbytes()))
    return OG_ERROR("bench input ", input.file, ": shorter than ", tensor.nbytes(), " bytes");
  return tensor;
}

// A loaded session, its inputs, and its plan compiled by one untimed run.
struct ReadyCase {
  std::unique_ptr<Session> session;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;  // reused across iterations
};

Result<std::unique_ptr<ReadyCase>> prepare(const BenchCase& c, int num_threads) {
  auto ready = std::make_unique<ReadyCase>();
  OG_ASSIGN_OR_RETURN(ready->session, Session::load(c.model_path, SessionOptions{.num_threads = num_threads}));
  for (const BenchInput& input : c.inputs) {
    OG_ASSIGN_OR_RETURN(Tensor tensor, read_input(input));
    ready->inputs.push_back(std::move(tensor));
  }
  OG_RETURN_IF_ERROR(ready->session->run_into(ready->inputs, ready->outputs));
  return ready;
}

void run_case(benchmark::State& state, const BenchCase& c, int num_threads) {
  // Google Benchmark calls this several times per case (sizing, repetitions): load once.
  static std::map<std::pair<std::string, int>, std::unique_ptr<ReadyCase>> loaded;
  auto& ready = loaded[{c.name, num_threads}];
  if (!ready) {
    auto prepared = prepare(c, num_threads);
    if (!prepared) {
      state.SkipWithError(prepared.status().message().c_str());
      return;
    }
    ready = std::move(prepared).value();
  }
  for (auto _ : state) {
    Status status = ready->session->run_into(ready->inputs, ready->outputs);
    if (!status.is_ok()) {
      state.SkipWithError(status.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(ready->outputs.front().raw());
  }
  using benchmark::Counter;
  if (c.flops > 0) state.counters["GFLOP/s"] = Counter(c.flops * 1e-9, Counter::kIsIterationInvariantRate);
  if (c.bytes > 0) state.counters["GB/s"] = Counter(c.bytes * 1e-9, Counter::kIsIterationInvariantRate);
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// Takes --models=DIR out of argv (Google Benchmark rejects flags it does not know).
std::string take_models_flag(int* argc, char** argv) {
  static constexpr std::string_view kFlag = "--models=";
  std::string dir;
  int kept = 0;
  for (int i = 0; i < *argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with(kFlag)) {
      dir = arg.substr(kFlag.size());
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  if (dir.empty() && std::getenv("OG_BENCH_MODELS") != nullptr) dir = std::getenv("OG_BENCH_MODELS");
  return dir;
}

}  // namespace
}  // namespace onnx_genai

int main(int argc, char** argv) {
  using namespace onnx_genai;
  const std::string models_dir = take_models_flag(&argc, argv);
  if (models_dir.empty()) {
    std::fprintf(stderr, "og_bench: give --models=DIR (written by tools/make_bench_models.py DIR)\n");
    return 2;
  }
  auto cases = read_manifest(models_dir);
  if (!cases) {
    std::fprintf(stderr, "og_bench: %s\n", cases.status().message().c_str());
    return 2;
  }
  static const std::vector<BenchCase> all_cases = std::move(cases).value();
  const int all_threads = usable_cpus();
  benchmark::AddCustomContext("threads_all", std::to_string(all_threads));
  for (const BenchCase& c : all_cases) {
    for (auto [label, threads] : {std::pair{"1", 1}, std::pair{"all", all_threads}}) {
      benchmark::RegisterBenchmark((c.name + "/threads:" + label).c_str(),
                                   [&c, threads = threads](benchmark::State& state) { run_case(state, c, threads); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
