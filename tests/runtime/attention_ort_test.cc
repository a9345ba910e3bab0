// com.microsoft GroupQueryAttention, ours against ONNX Runtime 1.30 on single-node models: the
// cases pin the semantics the double reference in tests/ops/attention_test_util.h encodes
// (padding rows of ragged prompts, the zeroed present tail, positions, windows, softcap,
// sinks, shared KV). Both runtimes get the same random inputs; every output element is
// compared, padding rows and unused cache rows included.
//
// Tolerance |ours - ort| <= tol * (1 + |ort|): f32 2e-5 (ORT's flash kernel sums in another
// order), f16 4e-3 (a couple of f16 ulps of the rounded outputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "ops/attention_test_util.h"
#include "oracle_io.h"

namespace onnx_genai {
namespace {

using testing::GqaCase;

// One model per line "name dtype inputs... -- attr=value...": an input is name:rank dims...
// ("q:3:2:5:64"); attributes are integers or floats.
constexpr const char* kBuilder = R"PY(
import sys, onnx
from onnx import helper, TensorProto
types = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64}
slots = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
         "sin_cache", "position_ids", "attention_bias", "head_sink"]
for line in open(sys.argv[2]):
    head, attrs = line.split(" -- ")
    fields = head.split()
    name, outputs = fields[0], int(fields[1])
    names, infos = [""] * len(slots), []
    for spec in fields[2:]:
        slot, dtype, *dims = spec.split(":")
        names[slots.index(slot)] = slot
        infos.append(helper.make_tensor_value_info(slot, types[dtype], [int(d) for d in dims]))
    while names[-1] == "":
        names.pop()
    kw = {}
    for a in attrs.split():
        k, v = a.split("=")
        kw[k] = float(v) if "." in v else int(v)
    outs = ["output", "present_key", "present_value"][:outputs]
    node = helper.make_node("GroupQueryAttention", names, outs, domain="com.microsoft", **kw)
    out_type = [i for i in infos if i.name == "query"][0].type.tensor_type.elem_type
    graph = helper.make_graph([node], name, infos, [helper.make_tensor_value_info(o, out_type, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    onnx.save(model, f"{sys.argv[1]}/{name}.onnx")
)PY";

const char* const kSlotNames[] = {"query",    "key",       "value",        "past_key",       "past_value", "seqlens_k",
                                  "total_sequence_length", "cos_cache", "sin_cache", "position_ids", "attention_bias",
                                  "head_sink"};

struct OrtCase {
  std::string name;
  GqaCase c;
  bool f16 = false;
  int threads = 1;
};

std::vector<OrtCase> ort_cases() {
  std::vector<OrtCase> cases;
  const auto add = [&](GqaCase c, bool f16 = false, int threads = 1) {
    cases.push_back({"g" + std::to_string(cases.size()), std::move(c), f16, threads});
  };
  const auto prompt = [](int64_t head, std::vector<int32_t> seqlens, int64_t seq) {
    GqaCase c;
    c.batch = static_cast<int64_t>(seqlens.size());
    c.seq = c.total = seq;
    c.head = head;
    c.seqlens = std::move(seqlens);
    return c;
  };
  const auto decode = [](int64_t head, int64_t past, std::vector<int32_t> seqlens, int64_t total) {
    GqaCase c;
    c.batch = static_cast<int64_t>(seqlens.size());
    c.total = total;
    c.past = past;
    c.head = head;
    c.seqlens = std::move(seqlens);
    return c;
  };
  const auto rotary = [](GqaCase c, bool interleaved, int64_t dim = 0) {
    c.rotary_dim = dim > 0 ? dim : c.head;
    c.rotary_rows = c.present_len() + 2;
    c.interleaved = interleaved;
    return c;
  };
  add(rotary(prompt(64, {6, 3, 0}, 7), false));             // ragged prompt: padding rows attend to valid keys
  add(rotary(prompt(80, {4, 2}, 5), true), true);
  add(decode(96, 9, {9, 4}, 10));                            // separate buffers, ragged
  add(rotary(decode(128, 24, {17, 6}, 18), false));          // max-length buffers: zero tail
  add(rotary(decode(256, 12, {11}, 12), true, 128), true);   // partial rotary, f16
  GqaCase c = rotary(prompt(64, {8, 5}, 9), false);
  c.window = 3;
  c.softcap = 0.8f;
  c.scale = 0.3f;
  add(c);
  c = decode(64, 16, {12, 7}, 13);
  c.window = 5;
  c.smooth = true;
  add(c, true);
  c = prompt(32, {5, 3}, 6);
  c.sink = true;
  c.bias_batch = 2;
  c.bias_heads = 1;
  add(c);
  c = rotary(decode(64, 10, {6, 2}, 7), false);
  c.position_ids = true;
  c.packed = true;
  add(c);
  c = rotary(prompt(64, {4, 4}, 5), true);
  c.packed = true;
  c.causal = false;
  add(c);
  c = decode(64, 10, {7, 3}, 8);
  c.shared_kv = true;
  add(c);
  c = rotary(decode(64, 5, {7}, 8), false);
  c.seq = 3;  // a prompt chunk on top of cached rows
  add(c, true);
  c = rotary(decode(128, 2047, {2047}, 2048), false);  // long decode on two threads: KV split
  c.heads = 14;
  add(c, false, 2);
  return cases;
}

std::string input_spec(const char* slot, const Tensor& t) {
  std::string spec = std::string(slot) + ":" + (t.dtype() == DType::kF32   ? "float32"
                                                : t.dtype() == DType::kF16 ? "float16"
                                                : t.dtype() == DType::kI32 ? "int32"
                                                                           : "int64");
  for (int64_t d : t.shape().dims()) spec += ":" + std::to_string(d);
  return spec;
}

std::string attribute_spec(const GqaCase& c) {
  std::string a = "num_heads=" + std::to_string(c.heads) + " kv_num_heads=" + std::to_string(c.kv_heads);
  if (c.rotary_dim > 0) a += " do_rotary=1 rotary_interleaved=" + std::to_string(c.interleaved ? 1 : 0);
  if (c.window >= 0) a += " local_window_size=" + std::to_string(c.window);
  if (c.softcap > 0) a += " softcap=" + std::to_string(c.softcap);
  if (c.scale != 0) a += " scale=" + std::to_string(c.scale);
  if (c.smooth) a += " smooth_softmax=1";
  if (!c.causal) a += " causal=0";
  return a;
}

template <typename T>
std::vector<Tensor> case_inputs(const OrtCase& oc, uint32_t seed) {
  testing::OpCall unused = testing::gqa_call();  // gqa_inputs also sets attributes on a call
  return testing::gqa_inputs<T>(oc.c, testing::make_gqa_data<T>(oc.c, seed), unused);
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype() == DType::kF16 ? static_cast<float>(t.data<Float16>()[i]) : t.data<float>()[i];
  }
  return out;
}

TEST(GroupQueryAttentionOrt, MatchesOnnxRuntime) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(dir.valid());
  const std::vector<OrtCase> cases = ort_cases();
  std::vector<std::vector<Tensor>> inputs;
  {
    std::FILE* script = std::fopen((dir.path() / "build.py").c_str(), "w");
    std::FILE* list = std::fopen((dir.path() / "cases.txt").c_str(), "w");
    ASSERT_TRUE(script != nullptr && list != nullptr);
    std::fputs(kBuilder, script);
    uint32_t seed = 1;
    for (const OrtCase& oc : cases) {
      inputs.push_back(oc.f16 ? case_inputs<Float16>(oc, seed++) : case_inputs<float>(oc, seed++));
      std::string line = oc.name + " " + std::to_string(oc.c.omit_present ? 1 : 3);
      for (size_t i = 0; i < inputs.back().size(); ++i) {
        if (inputs.back()[i].defined()) line += " " + input_spec(kSlotNames[i], inputs.back()[i]);
      }
      std::fprintf(list, "%s -- %s\n", line.c_str(), attribute_spec(oc.c).c_str());
    }
    std::fclose(script);
    std::fclose(list);
  }
  auto built = testing::run_command("/usr/bin/python3 " + testing::shell_quote((dir.path() / "build.py").string()) + " " +
                                        testing::shell_quote(dir.path().string()) + " " +
                                        testing::shell_quote((dir.path() / "cases.txt").string()),
                                    dir.path());
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  ASSERT_EQ(built->exit_code, 0) << built->err;

  float worst_f32 = 0.0f, worst_f16 = 0.0f;
  for (size_t n = 0; n < cases.size(); ++n) {
    const OrtCase& oc = cases[n];
    const std::string model = (dir.path() / (oc.name + ".onnx")).string();
    std::map<std::string, Tensor> named;
    std::vector<testing::NamedTensor> feeds;
    for (size_t i = 0; i < inputs[n].size(); ++i) {
      if (!inputs[n][i].defined()) continue;
      named[kSlotNames[i]] = inputs[n][i];
      feeds.push_back({kSlotNames[i], inputs[n][i]});
    }
    SessionOptions options;
    options.num_threads = oc.threads;
    auto session = Session::load(model, options);
    ASSERT_TRUE(session.is_ok()) << oc.name << ": " << session.status().message();
    auto ours = (*session)->run_named(named);
    ASSERT_TRUE(ours.is_ok()) << oc.name << ": " << ours.status().message();
    auto ort = testing::run_onnx_runtime(model, feeds, oc.threads);
    ASSERT_TRUE(ort.is_ok()) << oc.name << ": " << ort.status().message();
    ASSERT_EQ(ours->size(), ort->size()) << oc.name;
    const float tol = oc.f16 ? 4e-3f : 2e-5f;
    for (size_t o = 0; o < ours->size(); ++o) {
      ASSERT_EQ((*ours)[o].shape(), (*ort)[o].tensor.shape()) << oc.name << " output " << o;
      const std::vector<float> got = as_floats((*ours)[o]), want = as_floats((*ort)[o].tensor);
      float& worst = oc.f16 ? worst_f16 : worst_f32;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - want[i]));
        ASSERT_LE(std::fabs(got[i] - want[i]), tol * (1.0f + std::fabs(want[i])))
            << oc.name << " output " << o << " at " << i << ": " << got[i] << " vs " << want[i];
      }
    }
  }
  std::printf("GroupQueryAttention vs ONNX Runtime, %zu cases: worst |diff| f32 %.3g, f16 %.3g\n", cases.size(),
              static_cast<double>(worst_f32), static_cast<double>(worst_f16));
}

}  // namespace
}  // namespace onnx_genai
