// MatMul and Gemm: the CUDA kernels (cuBLASLt) against the CPU kernels on random shapes covering
// numpy matmul broadcasting (stacked rows, batched, broadcast batches on either side, 1-D
// operands, K = 0), M = 1, odd K / N, weights as constants and as graph inputs, model-sized
// shapes; Gemm's transposes, alpha / beta and every form of C; pointers that are not 16-byte
// aligned; timed decode and prefill products (CUDA graph replays, the heuristic's first
// algorithms side by side); and inputs the kernels reject.
//
// Tolerances are the harness's: both sides accumulate in f32 and round each output once, which
// is the case the harness documents (cuBLASLt is kept off TF32, 16-bit accumulation and 16-bit
// split-K reductions, see matmul_kernels.cu).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "core/cuda/cuda_check.h"
#include "cuda_test_util.h"
#include "ops/cuda/matmul_kernels.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// A prepared CUDA kernel with device copies of its inputs and room for its outputs and workspace;
// every buffer starts `shift` bytes past cudaMalloc's 256-byte alignment.
class DeviceNode {
 public:
  Status init(const Node& node, const std::vector<Tensor>& inputs, const cuda::Stream& stream, size_t shift = 0) {
    OG_ASSIGN_OR_RETURN(prepared_, prepare_node(node, inputs, DeviceType::kCuda));
    OG_ASSIGN_OR_RETURN(host_outputs_, allocate_host_outputs(prepared_));
    buffers_.reserve(inputs.size() + host_outputs_.size() + 1);
    for (const Tensor& t : inputs) {
      OG_ASSIGN_OR_RETURN(void* data, place(static_cast<size_t>(t.nbytes()), shift));
      OG_RETURN_IF_ERROR(cuda::copy_to_device(data, t.raw(), static_cast<size_t>(t.nbytes()), stream.handle()));
      in_.push_back({t.dtype(), &t.shape(), data});
    }
    for (const Tensor& t : host_outputs_) {
      OG_ASSIGN_OR_RETURN(void* data, place(static_cast<size_t>(t.nbytes()), shift));
      OG_RETURN_IF_ERROR(cuda::fill_bytes(data, 0xFF, static_cast<size_t>(t.nbytes()), stream.handle()));  // NaN
      out_.push_back({t.dtype(), &t.shape(), data});
    }
    if (prepared_.workspace_bytes > 0) {
      OG_ASSIGN_OR_RETURN(workspace_, place(prepared_.workspace_bytes, shift));
    }
    return Status::ok();
  }

  const OpKernel& kernel() const { return *prepared_.kernel; }
  // Runs the kernel on the stream; with `i` >= 0, input `i` is read from `data` instead.
  Status run(const cuda::Stream& stream, int i = -1, const void* data = nullptr) const {
    std::vector<KernelTensor> in = in_;
    if (i >= 0) in[static_cast<size_t>(i)].data = const_cast<void*>(data);
    return kernel().run(KernelContext{in, out_, workspace_, nullptr, stream.handle()});
  }
  const KernelTensor& input(int i) const { return in_[static_cast<size_t>(i)]; }
  void* output_data() const { return out_[0].data; }
  Result<Tensor> download_output(const cuda::Stream& stream) {
    Tensor& t = host_outputs_[0];
    OG_RETURN_IF_ERROR(cuda::copy_to_host(t.raw(), out_[0].data, static_cast<size_t>(t.nbytes()), stream.handle()));
    OG_RETURN_IF_ERROR(stream.synchronize());
    return t.clone();
  }

 private:
  Result<void*> place(size_t bytes, size_t shift) {
    OG_ASSIGN_OR_RETURN(buffers_.emplace_back(), cuda::DeviceBuffer::allocate(bytes + shift));
    return static_cast<void*>(static_cast<char*>(buffers_.back().data()) + shift);
  }

  PreparedNode prepared_;
  std::vector<Tensor> host_outputs_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<KernelTensor> in_, out_;
  void* workspace_ = nullptr;
};

class MatMulCudaTest : public CudaKernelTest {
 protected:
  // MatMul of random A and B (B an initializer when `constant_b`), CUDA against the CPU.
  void check_matmul(DType dtype, const Shape& a, const Shape& b, bool constant_b) {
    CudaNode spec("MatMul", "", {true}, 13);
    const std::vector<Tensor> inputs{random_float_tensor(dtype, a, rng_), random_float_tensor(dtype, b, rng_)};
    Node& node = spec.with_inputs(inputs);
    if (constant_b) node.inputs[1]->initializer = inputs[1].clone().value();
    compare(node, inputs,
            "MatMul " + std::string(dtype_name(dtype)) + " " + a.to_string() + " x " + b.to_string() +
                (constant_b ? " (constant B)" : " (B an input)"));
  }

  // Runs node's CUDA kernel with every buffer one element past 16-byte alignment.
  void check_shifted(const Node& node, const std::vector<Tensor>& inputs, const std::string& what) {
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    DeviceNode device;
    const Status ready = device.init(node, inputs, *stream_, static_cast<size_t>(dtype_storage_bytes(inputs[0].dtype(), 1)));
    ASSERT_TRUE(ready.is_ok()) << what << ": " << ready.message();
    const Status ran = device.run(*stream_);
    ASSERT_TRUE(ran.is_ok()) << what << ": " << ran.message();
    Result<Tensor> got = device.download_output(*stream_);
    ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().message();
    const DType dtype = (*cpu)[0].dtype();
    double& worst = worst_[dtype_name(dtype)];
    worst = std::max(worst, expect_close(*got, (*cpu)[0], tolerance_for(dtype), what));
  }
};

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// Sizes: 1, odd and model-like values; M is 1 (decode) a third of the time.
struct Dims {
  int64_t b, h, m, k, n;
  static Dims random(std::mt19937& rng) {
    constexpr int64_t kKs[] = {1, 7, 33, 64, 96, 127, 128, 257, 896, 1000};
    constexpr int64_t kNs[] = {1, 3, 64, 127, 256, 300, 513};
    Dims d;
    d.b = uniform(rng, 2, 3);
    d.h = uniform(rng, 2, 4);
    d.m = rng() % 3 == 0 ? 1 : uniform(rng, 1, 40);
    d.k = rng() % 3 == 0 ? uniform(rng, 1, 1100) : kKs[rng() % std::size(kKs)];
    d.n = rng() % 3 == 0 ? uniform(rng, 1, 600) : kNs[rng() % std::size(kNs)];
    return d;
  }
};

// Each broadcasting layout of numpy matmul the kernel plans differently (see matmul.cc).
struct Layout {
  const char* name;
  std::function<std::pair<Shape, Shape>(const Dims&)> shapes;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all{
      {"stacked rows", [](const Dims& d) { return std::pair{Shape{d.b, d.m, d.k}, Shape{d.k, d.n}}; }},
      {"2-D", [](const Dims& d) { return std::pair{Shape{d.m, d.k}, Shape{d.k, d.n}}; }},
      {"batched", [](const Dims& d) { return std::pair{Shape{d.b, d.h, d.m, d.k}, Shape{d.b, d.h, d.k, d.n}}; }},
      {"B shared across the outer batch",
       [](const Dims& d) { return std::pair{Shape{d.b, d.h, d.m, d.k}, Shape{1, d.h, d.k, d.n}}; }},
      {"B of lower rank", [](const Dims& d) { return std::pair{Shape{d.b, d.h, d.m, d.k}, Shape{d.h, d.k, d.n}}; }},
      {"A shared across the outer batch",
       [](const Dims& d) { return std::pair{Shape{1, d.h, d.m, d.k}, Shape{d.b, d.h, d.k, d.n}}; }},
      {"2-D A, batched B", [](const Dims& d) { return std::pair{Shape{d.m, d.k}, Shape{d.b, d.k, d.n}}; }},
      {"outer product of batches",
       [](const Dims& d) { return std::pair{Shape{d.b, 1, d.m, d.k}, Shape{1, d.h, d.k, d.n}}; }},
      {"B shared within a call", [](const Dims& d) { return std::pair{Shape{d.b, d.h, d.m, d.k}, Shape{d.b, 1, d.k, d.n}}; }},
      {"1-D A", [](const Dims& d) { return std::pair{Shape{d.k}, Shape{d.k, d.n}}; }},
      {"1-D A, batched B", [](const Dims& d) { return std::pair{Shape{d.k}, Shape{d.b, d.k, d.n}}; }},
      {"1-D B", [](const Dims& d) { return std::pair{Shape{d.b, d.m, d.k}, Shape{d.k}}; }},
      {"1-D A and B", [](const Dims& d) { return std::pair{Shape{d.k}, Shape{d.k}}; }},
      {"K = 0", [](const Dims& d) { return std::pair{Shape{d.b, d.m, 0}, Shape{0, d.n}}; }},
      {"empty batch", [](const Dims& d) { return std::pair{Shape{0, d.m, d.k}, Shape{1, d.k, d.n}}; }},
  };
  return all;
}

using MatMulCuda = MatMulCudaTest;

TEST_F(MatMulCuda, MatchesCpuOnEveryBroadcastLayout) {
  for (const Layout& layout : layouts()) {
    for (int trial = 0; trial < 6; ++trial) {
      const auto [a, b] = layout.shapes(Dims::random(rng_));
      SCOPED_TRACE(layout.name);
      check_matmul(kDtypes[trial % 3], a, b, trial >= 3);
    }
  }
}

// Decode and prefill shapes of real models (Qwen2.5 0.5B, Llama-3 8B), long K included.
TEST_F(MatMulCuda, MatchesCpuAtModelSizes) {
  const std::pair<Shape, Shape> shapes[] = {
      {Shape{1, 1, 896}, Shape{896, 4864}},   {Shape{1, 1, 4864}, Shape{4864, 896}},
      {Shape{1, 1, 4096}, Shape{4096, 14336}}, {Shape{1, 1, 14336}, Shape{14336, 4096}},
      {Shape{2, 37, 896}, Shape{896, 896}},   {Shape{1, 14, 16, 64}, Shape{1, 14, 64, 16}},
  };
  for (DType dtype : kDtypes) {
    for (const auto& [a, b] : shapes) check_matmul(dtype, a, b, true);
  }
}

// Pointers one element past 16-byte alignment (a caller's tensor at an odd offset): the kernel
// switches to the algorithm planned for element alignment.
TEST_F(MatMulCuda, UnalignedPointersMatchCpu) {
  for (DType dtype : kDtypes) {
    for (const auto& [a, b] : {std::pair{Shape{3, 37, 64}, Shape{64, 96}}, std::pair{Shape{1, 256}, Shape{256, 1000}},
                               std::pair{Shape{2, 4, 9, 32}, Shape{2, 4, 32, 40}}}) {
      CudaNode spec("MatMul", "", {true}, 13);
      const std::vector<Tensor> inputs{random_float_tensor(dtype, a, rng_), random_float_tensor(dtype, b, rng_)};
      check_shifted(spec.with_inputs(inputs), inputs,
                    "unaligned MatMul " + std::string(dtype_name(dtype)) + " " + a.to_string() + " x " + b.to_string());
    }
  }
}

using GemmCuda = MatMulCudaTest;

// transA / transB, alpha / beta and every C that broadcasts to [M, N] (and none, and beta 0).
TEST_F(GemmCuda, MatchesCpuOnRandomCases) {
  const auto c_shapes = [](int64_t m, int64_t n) {
    return std::vector<std::optional<Shape>>{std::nullopt, Shape{n},    Shape{1, n}, Shape{m, 1},
                                             Shape{m, n},  Shape{1, 1}, Shape{},     Shape{1}};
  };
  constexpr float kAlphas[] = {1.0f, 0.5f, -2.0f};
  constexpr float kBetas[] = {1.0f, 0.25f, 0.0f};
  for (int trial = 0; trial < 72; ++trial) {
    const DType dtype = kDtypes[trial % 3];
    const Dims d = Dims::random(rng_);
    const int64_t k = trial % 24 == 5 ? 0 : d.k;
    // Every (dtype, transA, transB) in each 12 trials, every C form in turn for 9 trials.
    const bool trans_a = trial % 2 == 1, trans_b = trial / 2 % 2 == 1;
    const std::optional<Shape> c = c_shapes(d.m, d.n)[static_cast<size_t>(trial / 9)];
    const float alpha = kAlphas[rng_() % 3], beta = kBetas[rng_() % 3];
    CudaNode spec("Gemm", "", {true}, 13);
    spec.attr_int("transA", trans_a).attr_int("transB", trans_b).attr_float("alpha", alpha).attr_float("beta", beta);
    std::vector<Tensor> inputs{random_float_tensor(dtype, trans_a ? Shape{k, d.m} : Shape{d.m, k}, rng_),
                               random_float_tensor(dtype, trans_b ? Shape{d.n, k} : Shape{k, d.n}, rng_)};
    if (c) inputs.push_back(random_float_tensor(dtype, *c, rng_));
    compare(spec.with_inputs(inputs), inputs,
            "Gemm " + std::string(dtype_name(dtype)) + " A" + inputs[0].shape().to_string() + (trans_a ? "^T" : "") +
                " B" + inputs[1].shape().to_string() + (trans_b ? "^T" : "") + " C" + (c ? c->to_string() : "-") +
                " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
  }
}

TEST_F(GemmCuda, UnalignedPointersMatchCpu) {
  for (DType dtype : kDtypes) {
    CudaNode spec("Gemm", "", {true}, 13);
    spec.attr_int("transB", 1);
    const std::vector<Tensor> inputs{random_float_tensor(dtype, Shape{5, 128}, rng_),
                                     random_float_tensor(dtype, Shape{72, 128}, rng_),
                                     random_float_tensor(dtype, Shape{72}, rng_)};
    check_shifted(spec.with_inputs(inputs), inputs, "unaligned Gemm " + std::string(dtype_name(dtype)));
  }
}

// Mean time of one enqueue(weights) over `runs` replays of a CUDA graph that records one
// enqueue per weight copy: the product's time without host launch overhead, weights read from
// HBM (the copies together pass the 50 MB L2, as a model's layers do), and proof that the run is
// capture-safe.
Result<double> microseconds_per_replayed_run(const std::function<Status(const void*)>& enqueue,
                                             const std::vector<const void*>& weights, const cuda::Stream& stream, int runs) {
  OG_RETURN_IF_ERROR(enqueue(weights[0]));  // outside the recording: cuBLASLt's first-call setup
  OG_RETURN_IF_ERROR(stream.synchronize());
  const auto all_copies = [&]() -> Status {
    for (const void* w : weights) OG_RETURN_IF_ERROR(enqueue(w));
    return Status::ok();
  };
  OG_ASSIGN_OR_RETURN(const double us, replay_microseconds(stream, all_copies, runs));
  return us / static_cast<double>(weights.size());
}

// One f16 product [M, K] x [K, N] with B a constant, set up for timing: its CPU result, the
// kernel prepared on device copies of the inputs, and copies of the weights so that the replays
// stream them from HBM (about 128 MB in all).
class TimedProduct {
 public:
  TimedProduct(const char* label, int64_t m, int64_t k, int64_t n) : label(label), m(m), k(k), n(n) {}
  const char* const label;
  const int64_t m, k, n;

  void set_up(std::mt19937& rng, const cuda::Stream& stream) {
    inputs_ = {random_float_tensor(DType::kF16, Shape{m, k}, rng), random_float_tensor(DType::kF16, Shape{k, n}, rng)};
    Node& node = spec_.with_inputs(inputs_);
    node.inputs[1]->initializer = inputs_[1].clone().value();
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs_);
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
    cpu_ = std::move(cpu->front());
    const Status ready = device_.init(node, inputs_, stream);
    ASSERT_TRUE(ready.is_ok()) << label << ": " << ready.message();
    const auto bytes = static_cast<size_t>(inputs_[1].nbytes());
    const int copies = static_cast<int>(std::clamp(std::ceil(128e6 / static_cast<double>(bytes)), 1.0, 8.0));
    weights_ = {device_.input(1).data};
    for (int c = 1; c < copies; ++c) {
      Result<cuda::DeviceBuffer> buffer = cuda::DeviceBuffer::allocate(bytes);
      ASSERT_TRUE(buffer.is_ok()) << buffer.status().message();
      copies_.push_back(std::move(buffer).value());
      ASSERT_TRUE(cuda::copy_on_device(copies_.back().data(), weights_[0], bytes, stream.handle()).is_ok());
      weights_.push_back(copies_.back().data());
    }
  }

  DeviceNode& device() { return device_; }

  // Times enqueue(weights) over the copies, checks the output against the CPU and prints a line.
  void time(const std::string& variant, const std::function<Status(const void*)>& enqueue, const std::string& algorithm,
            const cuda::Stream& stream) {
    const std::string what = std::string("MatMul timing ") + label + ", " + variant;
    ASSERT_TRUE(cuda::fill_bytes(device_.output_data(), 0xFF, static_cast<size_t>(cpu_.nbytes()), stream.handle()).is_ok());
    const Result<double> us = microseconds_per_replayed_run(enqueue, weights_, stream, 20);
    ASSERT_TRUE(us.is_ok()) << what << ": " << us.status().message();
    const Result<Tensor> got = device_.download_output(stream);
    ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().message();
    expect_close(*got, cpu_, tolerance_for(DType::kF16), what);
    const double weight_bytes = static_cast<double>(inputs_[1].nbytes());
    const double flops = 2.0 * static_cast<double>(m * k * n);
    std::printf("  MatMul f16 %s, %s: %.2f us/run (CUDA graph replays over %zu weight copies), %.0f GB/s of weights, "
                "%.1f TFLOP/s; %s\n",
                label, variant.c_str(), *us, weights_.size(), weight_bytes / (*us * 1e3), flops / (*us * 1e6),
                algorithm.c_str());
  }

 private:
  CudaNode spec_{"MatMul", "", {true}, 13};
  std::vector<Tensor> inputs_;
  Tensor cpu_;
  DeviceNode device_;
  std::vector<cuda::DeviceBuffer> copies_;
  std::vector<const void*> weights_;
};

// f16 decode GEMVs (the LM head included) and a prefill GEMM: the kernel as a session runs it,
// then the heuristic's first algorithms through CublasLtGemm (candidate 0 is the kernel's), each
// checked against the CPU and timed: shows whether the first choice is the fastest, and how
// close each gets to HBM bandwidth.
TEST_F(MatMulCuda, DecodeAndPrefillTiming) {
  constexpr int kMaxTimedCandidates = 4;
  TimedProduct products[] = {
      {"LM head [1,896] x [896,151936]", 1, 896, 151936},
      {"[1,4096] x [4096,4096]", 1, 4096, 4096},
      {"[1,4096] x [4096,14336]", 1, 4096, 14336},
      {"prefill [512,4096] x [4096,4096]", 512, 4096, 4096},
  };
  for (TimedProduct& t : products) {
    t.set_up(rng_, *stream_);
    if (HasFatalFailure()) return;
    DeviceNode& device = t.device();
    t.time("kernel", [&](const void* w) { return device.run(*stream_, 1, w); }, "the heuristic's first choice", *stream_);
    cuda::GemmProblem problem;
    problem.dtype = DType::kF16;
    problem.m = t.m;
    problem.k = t.k;
    problem.n = t.n;
    for (int candidate = 0; candidate < kMaxTimedCandidates; ++candidate) {
      Result<std::unique_ptr<cuda::CublasLtGemm>> gemm = cuda::CublasLtGemm::plan(problem, candidate);
      if (!gemm.is_ok()) {
        std::printf("  MatMul f16 %s: %s\n", t.label, gemm.status().message().c_str());
        break;
      }
      cuda::DeviceBuffer workspace;
      if ((*gemm)->workspace_bytes() > 0) {
        Result<cuda::DeviceBuffer> buffer = cuda::DeviceBuffer::allocate((*gemm)->workspace_bytes());
        ASSERT_TRUE(buffer.is_ok()) << buffer.status().message();
        workspace = std::move(buffer).value();
      }
      const auto enqueue = [&](const void* w) {
        return (*gemm)->run(device.input(0).data, w, device.output_data(), workspace.data(), stream_->handle());
      };
      t.time("candidate " + std::to_string(candidate), enqueue, (*gemm)->describe(), *stream_);
    }
  }
}

// Inputs the kernels reject fail in prepare, naming the node (no device needed: the checks come
// before cuBLASLt is touched); dtypes without a CUDA kernel are left to the CPU.
TEST(MatMulCudaErrors, BadInputsNameTheNode) {
  std::mt19937 rng(7);
  const auto expect_error = [](CudaNode& spec, const std::vector<Tensor>& inputs, const std::string& want) {
    Result<PreparedNode> prepared = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok()) << want;
    const std::string& message = prepared.status().message();
    EXPECT_NE(message.find(want), std::string::npos) << message;
  };
  {
    CudaNode spec("MatMul", "", {true}, 13);
    expect_error(spec, {random_float_tensor(DType::kF16, Shape{2, 8}, rng), random_float_tensor(DType::kF32, Shape{8, 3}, rng)},
                 "MatMul (node 'cuda_test_MatMul'): A and B dtypes differ");
  }
  {
    CudaNode spec("MatMul", "", {true}, 13);
    expect_error(spec, {random_float_tensor(DType::kF16, Shape{2, 8}, rng), random_float_tensor(DType::kF16, Shape{7, 3}, rng)},
                 "MatMul (node 'cuda_test_MatMul'): inner dimensions differ");
  }
  {
    CudaNode spec("Gemm", "", {true}, 13);
    expect_error(spec,
                 {random_float_tensor(DType::kBF16, Shape{2, 8}, rng), random_float_tensor(DType::kBF16, Shape{8, 3}, rng),
                  random_float_tensor(DType::kF32, Shape{3}, rng)},
                 "Gemm (node 'cuda_test_Gemm'): A and C dtypes differ");
  }
  {
    CudaNode spec("Gemm", "", {true}, 13);
    expect_error(spec,
                 {random_float_tensor(DType::kF32, Shape{2, 8}, rng), random_float_tensor(DType::kF32, Shape{8, 3}, rng),
                  random_float_tensor(DType::kF32, Shape{2, 2}, rng)},
                 "Gemm (node 'cuda_test_Gemm'): C [2,2] does not broadcast to [2,3]");
  }
  {
    CudaNode spec("MatMul", "", {true}, 13);
    const std::vector<Tensor> inputs{Tensor::allocate(DType::kF64, Shape{2, 8}).value(),
                                     Tensor::allocate(DType::kF64, Shape{8, 3}).value()};
    EXPECT_FALSE(prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda).is_ok()) << "f64 has no CUDA MatMul";
  }
}

}  // namespace
}  // namespace onnx_genai::testing
