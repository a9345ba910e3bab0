// Kernel-vs-CPU harness for the CUDA kernels (llama.cpp's test-backend-ops idea): a one-node
// graph built in the test runs through the CPU kernel and through the CUDA kernel on the same
// inputs (uploaded, run on a stream, downloaded), and the outputs are compared with a tolerance
// per dtype. Needs only core, graph and ops: it builds on the GPU machine (OG_KERNELS_ONLY).
//
//   CudaNode node("SkipSimplifiedLayerNormalization", "com.microsoft", {true, false, true, true});
//   node.attr_float("epsilon", 1e-6f);
//   auto both = run_cpu_and_cuda(node.node(), inputs, stream);   // both->cpu[i], both->cuda[i]
//
// Tolerances (applied by expect_outputs_close), for outputs that the two sides compute in f32
// in different orders and round to the output dtype:
//   normwise  ||cuda - cpu|| / ||cpu||          <= norm_rel      (METHOD.md's measure)
//   elementwise |cuda - cpu| <= elem_rel * (|cpu| + rms(cpu))   (rms keeps cancellations near 0 fair)
//   f32: 1e-5 / 1e-4;  f16: 1e-3 / 2e-3 (2 ulp);  bf16: 8e-3 / 1.6e-2 (2 ulp).
// Device outputs are filled with 0xFF bytes (NaN) before the run, so an element the kernel
// never writes fails the comparison; a NaN on one side only always fails.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device.h"
#include "core/cuda/graph.h"
#include "core/cuda/memory.h"
#include "core/cuda/stream.h"
#include "graph/graph.h"
#include "ops/op.h"

namespace onnx_genai::testing {

// A one-node graph; `outputs[i]` false omits optional output i.
class CudaNode {
 public:
  CudaNode(std::string op_type, std::string domain, const std::vector<bool>& outputs, int opset = 1) {
    node_.op_type = std::move(op_type);
    node_.domain = std::move(domain);
    node_.opset = opset;
    node_.name = "cuda_test_" + node_.op_type;
    for (size_t i = 0; i < outputs.size(); ++i) {
      node_.outputs.push_back(outputs[i] ? graph_.add_value("out" + std::to_string(i)) : nullptr);
    }
  }
  CudaNode& attr_int(const std::string& name, int64_t v) {
    node_.attrs.set(name, Attribute{.kind = Attribute::Kind::kInt, .i = v});
    return *this;
  }
  CudaNode& attr_float(const std::string& name, float v) {
    node_.attrs.set(name, Attribute{.kind = Attribute::Kind::kFloat, .f = v});
    return *this;
  }
  CudaNode& attr_string(const std::string& name, std::string v) {
    node_.attrs.set(name, Attribute{.kind = Attribute::Kind::kString, .s = std::move(v)});
    return *this;
  }
  // Undefined tensors are omitted optional inputs.
  Node& with_inputs(const std::vector<Tensor>& inputs) {
    node_.inputs.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      node_.inputs.push_back(inputs[i].defined() ? graph_.add_value("in" + std::to_string(i)) : nullptr);
    }
    return node_;
  }

 private:
  Graph graph_;
  Node node_;
};

struct PreparedNode {
  std::unique_ptr<OpKernel> kernel;
  std::vector<TensorInfo> input_infos;
  std::vector<std::optional<TensorInfo>> outputs;  // nullopt for omitted outputs
  size_t workspace_bytes = 0;
};

// Shape inference, kernel lookup for `device` and prepare(), as a session would do them.
inline Result<PreparedNode> prepare_node(const Node& node, const std::vector<Tensor>& inputs, DeviceType device) {
  const OpRegistry& registry = OpRegistry::instance();
  const OpSchema* schema = registry.find_schema(node.domain, node.op_type);
  if (schema == nullptr) return OG_ERROR(node.describe(), ": unsupported op");
  PreparedNode prepared;
  prepared.input_infos.resize(inputs.size());
  std::vector<DType> dtypes(inputs.size(), DType::kUndefined);
  InferContext infer{node, {}, {}, {}};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool present = inputs[i].defined();
    if (present) prepared.input_infos[i] = {inputs[i].dtype(), inputs[i].shape()}, dtypes[i] = inputs[i].dtype();
    infer.inputs.push_back(present ? &prepared.input_infos[i] : nullptr);
    infer.input_values.push_back(present ? &inputs[i] : nullptr);
  }
  infer.outputs.resize(node.outputs.size());
  OG_RETURN_IF_ERROR(schema->infer_shapes(infer));
  OG_ASSIGN_OR_RETURN(const KernelDef* def, registry.find_kernel(node, device, dtypes));
  prepared.kernel = def->create(node);
  // output_infos points into prepared.outputs: it must not reallocate while they are taken.
  prepared.outputs.reserve(infer.outputs.size());
  std::vector<const TensorInfo*> output_infos;
  for (size_t i = 0; i < infer.outputs.size(); ++i) {
    if (node.outputs[i] != nullptr && !infer.outputs[i]) return OG_ERROR(node.describe(), ": output ", i, " not inferred");
    prepared.outputs.push_back(node.outputs[i] != nullptr ? infer.outputs[i] : std::nullopt);
    output_infos.push_back(node.outputs[i] != nullptr ? &*prepared.outputs.back() : nullptr);
  }
  PrepareContext ctx{node, infer.inputs, infer.input_values, output_infos};
  OG_RETURN_IF_ERROR(prepared.kernel->prepare(ctx));
  prepared.workspace_bytes = ctx.workspace_bytes;
  return prepared;
}

// Host output tensors (undefined for omitted outputs) shaped as prepared.
inline Result<std::vector<Tensor>> allocate_host_outputs(const PreparedNode& prepared) {
  std::vector<Tensor> outputs(prepared.outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!prepared.outputs[i]) continue;
    OG_ASSIGN_OR_RETURN(outputs[i], Tensor::allocate(prepared.outputs[i]->dtype, prepared.outputs[i]->shape));
  }
  return outputs;
}

inline Result<std::vector<Tensor>> run_on_cpu(const Node& node, const std::vector<Tensor>& inputs) {
  OG_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(node, inputs, DeviceType::kCpu));
  OG_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocate_host_outputs(prepared));
  std::vector<KernelTensor> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) in[i] = {inputs[i].dtype(), &inputs[i].shape(), const_cast<void*>(inputs[i].raw())};
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined()) out[i] = {outputs[i].dtype(), &outputs[i].shape(), outputs[i].raw()};
  }
  std::vector<float> workspace((prepared.workspace_bytes + sizeof(float) - 1) / sizeof(float) + 16);
  // 64-byte alignment, as the session's arena gives kernels.
  void* aligned = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 64 / sizeof(float)) % 16;
  KernelContext ctx{in, out, prepared.workspace_bytes ? aligned : nullptr, nullptr};
  OG_RETURN_IF_ERROR(prepared.kernel->run(ctx));
  return outputs;
}

// Uploads the inputs, runs the CUDA kernel on `stream`, downloads the outputs.
// Bytes after each output that run_on_cuda(..., guard = true) checks are left as it filled them.
inline constexpr size_t kOutputGuardBytes = 4096;

// `guard`: each output buffer gets kOutputGuardBytes more, filled like the output (0xFF), and any
// byte of them written is an error (an out-of-bounds write).
inline Result<std::vector<Tensor>> run_on_cuda(const Node& node, const std::vector<Tensor>& inputs, const cuda::Stream& stream,
                                               bool guard = false) {
  OG_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(node, inputs, DeviceType::kCuda));
  OG_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocate_host_outputs(prepared));
  std::vector<cuda::DeviceBuffer> buffers;
  buffers.reserve(inputs.size() + outputs.size() + 1);
  std::vector<KernelTensor> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const auto bytes = static_cast<size_t>(inputs[i].nbytes());
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
    OG_RETURN_IF_ERROR(cuda::copy_to_device(buffers.back().data(), inputs[i].raw(), bytes, stream.handle()));
    in[i] = {inputs[i].dtype(), &inputs[i].shape(), buffers.back().data()};
  }
  std::vector<void*> device_outputs(outputs.size(), nullptr);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    const auto bytes = static_cast<size_t>(outputs[i].nbytes()) + (guard ? kOutputGuardBytes : 0);
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
    OG_RETURN_IF_ERROR(cuda::fill_bytes(buffers.back().data(), 0xFF, bytes, stream.handle()));
    device_outputs[i] = buffers.back().data();
    out[i] = {outputs[i].dtype(), &outputs[i].shape(), device_outputs[i]};
  }
  void* workspace = nullptr;
  if (prepared.workspace_bytes > 0) {
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(prepared.workspace_bytes));
    workspace = buffers.back().data();
  }
  KernelContext ctx{in, out, workspace, nullptr, stream.handle()};
  OG_RETURN_IF_ERROR(prepared.kernel->run(ctx));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    OG_RETURN_IF_ERROR(cuda::copy_to_host(outputs[i].raw(), device_outputs[i], static_cast<size_t>(outputs[i].nbytes()), stream.handle()));
  }
  std::vector<std::vector<uint8_t>> guards(guard ? outputs.size() : 0);
  for (size_t i = 0; i < guards.size(); ++i) {
    if (!outputs[i].defined()) continue;
    guards[i].resize(kOutputGuardBytes);
    OG_RETURN_IF_ERROR(cuda::copy_to_host(guards[i].data(), static_cast<char*>(device_outputs[i]) + outputs[i].nbytes(),
                                          kOutputGuardBytes, stream.handle()));
  }
  OG_RETURN_IF_ERROR(stream.synchronize());
  for (size_t i = 0; i < guards.size(); ++i) {
    for (size_t b = 0; b < guards[i].size(); ++b) {
      if (guards[i][b] != 0xFF) return OG_ERROR(node.describe(), ": output ", i, " written ", b, " bytes past its end");
    }
  }
  return outputs;
}

struct Tolerance {
  double norm_rel;
  double elem_rel;
};

inline Tolerance tolerance_for(DType t) {
  switch (t) {
    case DType::kF16: return {1e-3, 2e-3};
    case DType::kBF16: return {8e-3, 1.6e-2};
    default: return {1e-5, 1e-4};
  }
}

// Element i as a double (exact for every dtype here but int64 past 2^53).
inline double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF16: return static_cast<float>(t.data<Float16>()[i]);
    case DType::kBF16: return static_cast<float>(t.data<BFloat16>()[i]);
    case DType::kF64: return t.data<double>()[i];
    case DType::kI8: return t.data<int8_t>()[i];
    case DType::kU8:
    case DType::kBool: return t.data<uint8_t>()[i];
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(t.data<int64_t>()[i]);
    default: return t.data<float>()[i];
  }
}

// Every element of `got` (CUDA) against `want` (CPU) under `tol`; `what` names the case.
// Returns the normwise relative error (0 for an all-zero reference).
inline double expect_close(const Tensor& got, const Tensor& want, Tolerance tol, const std::string& what) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    ADD_FAILURE() << what << ": cuda " << dtype_name(got.dtype()) << got.shape().to_string() << " vs cpu "
                  << dtype_name(want.dtype()) << want.shape().to_string();
    return INFINITY;
  }
  const int64_t n = want.numel();
  double sq_ref = 0, sq_diff = 0;
  for (int64_t i = 0; i < n; ++i) sq_ref += element(want, i) * element(want, i);
  const double rms = n > 0 ? std::sqrt(sq_ref / static_cast<double>(n)) : 0;
  int reported = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = element(got, i), w = element(want, i);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= tol.elem_rel * (std::fabs(w) + rms);
    if (!std::isnan(w) && !std::isnan(g)) sq_diff += (g - w) * (g - w);
    if (!ok && reported++ < 5) ADD_FAILURE() << what << ": element " << i << " cuda " << g << " cpu " << w;
  }
  const double norm_rel = sq_ref > 0 ? std::sqrt(sq_diff / sq_ref) : 0.0;
  EXPECT_LE(norm_rel, tol.norm_rel) << what << ": normwise relative error";
  return norm_rel;
}

// Tensor of `dtype` (f32, f16, bf16) with values uniform in [lo, hi), rounded to the dtype.
inline Tensor random_float_tensor(DType dtype, Shape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::allocate(dtype, std::move(shape)).value();
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = dist(rng);
    if (dtype == DType::kF16) t.data<Float16>()[i] = Float16(v);
    else if (dtype == DType::kBF16) t.data<BFloat16>()[i] = BFloat16(v);
    else t.data<float>()[i] = v;
  }
  return t;
}

inline Tensor random_bytes(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(DType::kU8, std::move(shape)).value();
  std::uniform_int_distribution<int> dist(0, 255);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(dist(rng));
  return t;
}

// Skips (never passes) every test of a fixture when this machine has no device this build can
// run on, with the reason; otherwise owns a stream and a seeded generator.
class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<cuda::DeviceInfo> device = cuda::usable_device(0);
    if (!device.is_ok()) GTEST_SKIP() << "no usable CUDA device: " << device.status().message();
    Result<cuda::Stream> stream = cuda::Stream::create();
    ASSERT_TRUE(stream.is_ok()) << stream.status().message();
    stream_.emplace(std::move(stream).value());
  }

  // Runs `node` on both sides and compares every output present; `guard`: and checks that no
  // byte past an output was written (run_on_cuda).
  void compare(const Node& node, const std::vector<Tensor>& inputs, const std::string& what, bool guard = false) {
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_, guard);
    ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
    for (size_t i = 0; i < cpu->size(); ++i) {
      if (!(*cpu)[i].defined()) continue;
      const DType dtype = (*cpu)[i].dtype();
      const double err = expect_close((*gpu)[i], (*cpu)[i], tolerance_for(dtype), what + " output " + std::to_string(i));
      double& worst = worst_[dtype_name(dtype)];
      worst = std::max(worst, err);
    }
  }

  // The worst normwise error per output dtype, for the log (gpu-check's report).
  void TearDown() override {
    for (const auto& [dtype, err] : worst_) {
      std::printf("  worst ||cuda - cpu|| / ||cpu|| for %s outputs: %.3g\n", std::string(dtype).c_str(), err);
    }
  }

  std::optional<cuda::Stream> stream_;
  std::map<std::string_view, double> worst_;
  std::mt19937 rng_{20261130};
};

// Microseconds per replay of what `queue` queues on `stream`, recorded once as a CUDA graph (which
// also proves it capture-safe: no synchronisation, allocation or copy of data): replays for at
// least `warm_up_ms` first, then the median of `batches` batches of `replays`, timed by events.
inline Result<double> replay_microseconds(const cuda::Stream& stream, const std::function<Status()>& queue, int replays,
                                          int batches = 1, float warm_up_ms = 0.0f) {
  OG_ASSIGN_OR_RETURN(cuda::StreamGraph graph, cuda::StreamGraph::record(stream.handle(), queue));
  const auto s = static_cast<cudaStream_t>(stream.handle());
  cudaEvent_t start = nullptr, stop = nullptr;
  Status status = cuda::cuda_status(cudaEventCreate(&start), "event");
  if (status.is_ok()) status = cuda::cuda_status(cudaEventCreate(&stop), "event");
  const auto time_replays = [&](int count, float& ms) {
    Status st = cuda::cuda_status(cudaEventRecord(start, s), "record");
    for (int r = 0; st.is_ok() && r < count; ++r) st = graph.replay(stream.handle());
    if (st.is_ok()) st = cuda::cuda_status(cudaEventRecord(stop, s), "record");
    if (st.is_ok()) st = cuda::cuda_status(cudaEventSynchronize(stop), "synchronize");
    if (st.is_ok()) st = cuda::cuda_status(cudaEventElapsedTime(&ms, start, stop), "elapsed time");
    return st;
  };
  float warm_ms = 0.0f;
  for (int count = 1; status.is_ok() && (count == 1 || warm_ms < warm_up_ms); count *= 2) {
    float ms = 0.0f;
    status = time_replays(count, ms);
    warm_ms += ms;
  }
  std::vector<float> timed;
  for (int b = 0; status.is_ok() && b < batches; ++b) status = time_replays(replays, timed.emplace_back());
  if (stop != nullptr) cudaEventDestroy(stop);
  if (start != nullptr) cudaEventDestroy(start);
  OG_RETURN_IF_ERROR(status);
  std::sort(timed.begin(), timed.end());
  return 1e3 * timed[timed.size() / 2] / replays;
}

// Microseconds per run of `node`'s CUDA kernel on device copies of `inputs` (every output
// allocated), timed by CUDA graph replays: recording it also proves run() capture-safe.
inline Result<double> time_node(const Node& node, const std::vector<Tensor>& inputs, const cuda::Stream& stream) {
  OG_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(node, inputs, DeviceType::kCuda));
  std::vector<cuda::DeviceBuffer> buffers;
  buffers.reserve(inputs.size() + prepared.outputs.size() + 1);
  std::vector<KernelTensor> in, out;
  for (const Tensor& t : inputs) {
    const auto bytes = static_cast<size_t>(t.nbytes());
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
    OG_RETURN_IF_ERROR(cuda::copy_to_device(buffers.back().data(), t.raw(), bytes, stream.handle()));
    in.push_back({t.dtype(), &t.shape(), buffers.back().data()});
  }
  for (const std::optional<TensorInfo>& info : prepared.outputs) {
    if (!info) {  // an output the node does not produce
      out.push_back({});
      continue;
    }
    const auto bytes = static_cast<size_t>(dtype_storage_bytes(info->dtype, info->shape.numel()));
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
    out.push_back({info->dtype, &info->shape, buffers.back().data()});
  }
  void* workspace = nullptr;
  if (prepared.workspace_bytes > 0) {
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(prepared.workspace_bytes));
    workspace = buffers.back().data();
  }
  OG_RETURN_IF_ERROR(stream.synchronize());
  const KernelContext ctx{in, out, workspace, nullptr, stream.handle()};
  return replay_microseconds(stream, [&] { return prepared.kernel->run(ctx); }, 500);
}

}  // namespace onnx_genai::testing
