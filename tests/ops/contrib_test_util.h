// Helpers for the contrib-op tests (Skip norms, RotaryEmbedding, the Gelu family,
// GatherBlockQuantized).
//
// One-node models checked against ONNX Runtime, to pin an op's semantics:
//
//   OrtNodeModel m{.op_type = "FastGelu", .domain = "com.microsoft", .inputs = {"x"}, .outputs = {"y"},
//                  .feeds = {{"x", x}}};
//   auto both = run_ours_and_ort(m);   // both->ours[i], both->ort[i]: every node output, in order
//
// /usr/bin/python3 + onnx writes the model (graph inputs typed but unshaped, constants as raw
// initializers, so int4 / uint4 tensors that the ORT oracle cannot feed still reach the node;
// graph outputs untyped, so ONNX Runtime decides their dtypes); our Session and
// tests/oracle/ort_run.mjs then run it on the same feeds.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "oracle_io.h"

namespace onnx_genai::testing {

struct OrtNodeModel {
  std::string op_type;
  std::string domain;
  nlohmann::json attributes = nlohmann::json::object();  // name -> int, float or list of them
  std::vector<std::string> inputs;                       // node inputs in order; "" omits one
  std::vector<std::string> outputs;                      // node outputs in order; "" omits one
  std::vector<NamedTensor> feeds;                        // graph inputs
  std::vector<NamedTensor> constants;                    // initializers (any dtype)
  int default_opset = 23;                                // com.microsoft is always 1
};

struct BothOutputs {
  std::vector<Tensor> ours, ort;  // the node's non-empty outputs, in order
};

inline constexpr const char* kOrtNodeModelWriter = R"PY(
import json, sys, onnx
from onnx import helper
spec = json.load(open(sys.argv[1]))
def value_info(name, elem=None):
    v = onnx.ValueInfoProto()
    v.name = name
    if elem is not None:
        v.type.tensor_type.elem_type = elem
    return v
inits = []
for c in spec["constants"]:
    t = onnx.TensorProto()
    t.name, t.data_type = c["name"], c["elem"]
    t.dims.extend(c["dims"])
    t.raw_data = open(c["file"], "rb").read()
    inits.append(t)
node = helper.make_node(spec["op"], spec["inputs"], spec["outputs"], domain=spec["domain"], **spec["attrs"])
graph = helper.make_graph([node], "node", [value_info(f["name"], f["elem"]) for f in spec["feeds"]],
                          [value_info(o) for o in spec["outputs"] if o], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec["opset"]),
                                                helper.make_opsetid("com.microsoft", 1)])
model.ir_version = 10
onnx.save(model, spec["path"])
)PY";

inline Status write_bytes(const std::filesystem::path& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  return out ? Status::ok() : OG_ERROR("cannot write ", path.string());
}

// Writes `m` as an ONNX model at `path` (via /usr/bin/python3 + onnx); `dir` holds scratch files.
inline Status write_node_model(const OrtNodeModel& m, const std::filesystem::path& dir, const std::string& path) {
  nlohmann::json spec = {{"op", m.op_type},     {"domain", m.domain},   {"attrs", m.attributes},
                         {"inputs", m.inputs},  {"outputs", m.outputs}, {"opset", m.default_opset},
                         {"path", path},        {"feeds", nlohmann::json::array()},
                         {"constants", nlohmann::json::array()}};
  for (const auto& [name, t] : m.feeds) spec["feeds"].push_back({{"name", name}, {"elem", static_cast<int>(t.dtype())}});
  for (size_t i = 0; i < m.constants.size(); ++i) {
    const auto& [name, t] = m.constants[i];
    const auto file = dir / ("constant_" + std::to_string(i) + ".bin");
    OG_RETURN_IF_ERROR(write_bytes(file, t));
    spec["constants"].push_back({{"name", name}, {"elem", static_cast<int>(t.dtype())}, {"dims", t.shape().dims()},
                                 {"file", file.string()}});
  }
  std::ofstream(dir / "spec.json") << spec.dump();
  std::ofstream(dir / "writer.py") << kOrtNodeModelWriter;
  OG_ASSIGN_OR_RETURN(CommandResult run, run_command("/usr/bin/python3 " + shell_quote((dir / "writer.py").string()) + " " +
                                                         shell_quote((dir / "spec.json").string()),
                                                     dir));
  if (run.exit_code != 0) return OG_ERROR("writing the model failed: ", run.err);
  return Status::ok();
}

// Runs `m` in our Session (2 threads) and in ONNX Runtime.
inline Result<BothOutputs> run_ours_and_ort(const OrtNodeModel& m) {
  ScopedTempDir dir;
  if (!dir.valid()) return OG_ERROR("cannot create a temporary directory");
  const std::string path = (dir.path() / "model.onnx").string();
  OG_RETURN_IF_ERROR(write_node_model(m, dir.path(), path));
  SessionOptions options;
  options.num_threads = 2;
  OG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::load(path, options));
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, t] : m.feeds) feeds[name] = t;
  BothOutputs both;
  OG_ASSIGN_OR_RETURN(both.ours, session->run_named(feeds));
  OG_ASSIGN_OR_RETURN(std::vector<NamedTensor> ort, run_onnx_runtime(path, m.feeds));
  for (auto& named : ort) both.ort.push_back(std::move(named.tensor));
  return both;
}

// f32, f16 or bf16 elements as floats.
inline std::vector<float> float_values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::kF16: out[i] = static_cast<float>(t.data<Float16>()[i]); break;
      case DType::kBF16: out[i] = static_cast<float>(t.data<BFloat16>()[i]); break;
      default: out[i] = t.data<float>()[i]; break;
    }
  }
  return out;
}

// max |a - b| / (1 + |b|) over the elements (equal infinities and NaN against NaN count as 0);
// infinity when dtypes or shapes differ or only one side is NaN.
inline double max_relative_diff(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return INFINITY;
  const std::vector<float> x = float_values(a), y = float_values(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    } else if (x[i] != y[i]) {
      if (std::isinf(x[i]) || std::isinf(y[i])) return INFINITY;
      worst = std::max(worst, std::fabs(double{x[i]} - y[i]) / (1 + std::fabs(double{y[i]})));
    }
  }
  return worst;
}

// Checks that every output of `m` has ONNX Runtime's dtype and shape and values within `tol`
// (max_relative_diff), and prints the worst difference.
inline void expect_matches_ort(const OrtNodeModel& m, double tol) {
  auto both = run_ours_and_ort(m);
  ASSERT_TRUE(both.is_ok()) << both.status().message();
  ASSERT_EQ(both->ours.size(), both->ort.size());
  double worst = 0;
  for (size_t i = 0; i < both->ours.size(); ++i) {
    EXPECT_EQ(both->ours[i].dtype(), both->ort[i].dtype()) << "output " << i;
    EXPECT_EQ(both->ours[i].shape(), both->ort[i].shape()) << "output " << i;
    const double diff = max_relative_diff(both->ours[i], both->ort[i]);
    EXPECT_LE(diff, tol) << "output " << i;
    worst = std::max(worst, diff);
  }
  std::printf("[ ort      ] %s: worst |ours - ort| / (1 + |ort|) = %.3g\n", m.op_type.c_str(), worst);
}

// A failed result whose message names the node (OpCall names it "test_<op>") and contains `what`.
template <typename R>
::testing::AssertionResult fails_with(const R& result, const std::string& node, const std::string& what) {
  if (result.is_ok()) return ::testing::AssertionFailure() << "succeeded; expected an error mentioning '" << what << "'";
  const std::string& message = result.status().message();
  if (message.find("'" + node + "'") == std::string::npos || message.find(what) == std::string::npos) {
    return ::testing::AssertionFailure() << "error '" << message << "' lacks node '" << node << "' or '" << what << "'";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace onnx_genai::testing
