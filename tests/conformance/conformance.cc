// Runs the ONNX backend node tests (Debian's libonnx-testdata) through Session and compares
// every output with the reference data. Prints pass / fail / unsupported counts, writes a
// markdown report, and exits non-zero when a test of an implemented op fails without being
// listed (with its reason) in known_failures.txt, or when fewer than --min-pass tests pass.
//
// Tolerances (|got - want| <= atol + rtol * |want|), per output dtype:
//   float64/float32: rtol 1e-3, atol 1e-5   (ONNX's backend runner uses rtol 1e-3)
//   float16:         rtol 1e-3, atol 1e-3
//   bfloat16:        rtol 1e-2, atol 1e-2   (7-bit mantissa)
//   integers, bool:  exact
// Data quirk: this data stores bfloat16 tensors as UINT16; a UINT16 tensor where the model
// declares BFLOAT16 is read as bfloat16 bits.

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "onnx/model.h"
#include "onnx/tensor_proto.h"
#include "onnx_genai/session.h"
#include "ops/op.h"

namespace fs = std::filesystem;
using namespace onnx_genai;

namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType t) {
  switch (t) {
    case DType::kF16: return {1e-3, 1e-3};
    case DType::kBF16: return {1e-2, 1e-2};
    default: return {1e-3, 1e-5};
  }
}

double element_as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kF64: return t.data<double>()[i];
    case DType::kF16: return Float16::to_float(t.data<uint16_t>()[i]);
    case DType::kBF16: return BFloat16::to_float(t.data<uint16_t>()[i]);
    default: return 0;
  }
}

Result<Tensor> read_tensor_pb(const fs::path& path, DType declared) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return OG_ERROR("cannot parse ", path.string());
  if (declared == DType::kBF16 && proto.data_type() == onnx::TensorProto::UINT16) {
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  }
  TensorSource source(path.parent_path().string(), nullptr, nullptr, nullptr);
  return source.to_tensor(proto);
}

// Empty string when equal, else a one-line description of the first difference.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(dtype_name(got.dtype())) + " != " + std::string(dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape()) return "shape " + got.shape().to_string() + " != " + want.shape().to_string();
  if (dtype_is_float(got.dtype())) {
    const Tolerance tol = tolerance_for(got.dtype());
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double a = element_as_double(got, i), b = element_as_double(want, i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::isinf(b) && a == b) continue;
      if (!(std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b))) {
        std::ostringstream msg;
        msg << "element " << i << ": got " << a << ", want " << b;
        return msg.str();
      }
    }
    return "";
  }
  if (got.nbytes() != want.nbytes() || std::memcmp(got.raw(), want.raw(), static_cast<size_t>(got.nbytes())) != 0) {
    const auto g = got.to_i64_vector(), w = want.to_i64_vector();
    for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
      if (g[i] != w[i]) return "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", want " + std::to_string(w[i]);
    }
    return "bytes differ";
  }
  return "";
}

void collect_ops(const Graph& g, std::set<std::string>& ops) {
  for (const auto& n : g.nodes()) {
    ops.insert((n->domain.empty() ? "" : n->domain + "::") + n->op_type);
    for (const auto& [name, a] : n->attrs.all()) {
      if (a.kind == Attribute::Kind::kGraph && a.g) collect_ops(*a.g, ops);
    }
  }
}

enum class Outcome { kPass, kFail, kUnsupported };

struct TestResult {
  std::string name;
  Outcome outcome = Outcome::kPass;
  std::string detail;  // failure reason or missing ops
};

TestResult run_test(const fs::path& dir) {
  TestResult r{dir.filename().string()};
  auto model = load_onnx_model((dir / "model.onnx").string());
  if (!model.is_ok()) return {r.name, Outcome::kFail, model.status().message()};
  std::set<std::string> ops;
  collect_ops(*(*model)->graph, ops);
  std::string missing;
  for (const std::string& op : ops) {
    const auto sep = op.find("::");
    const std::string domain = sep == std::string::npos ? "" : op.substr(0, sep);
    const std::string type = sep == std::string::npos ? op : op.substr(sep + 2);
    if (!OpRegistry::instance().has_op(domain, type)) missing += (missing.empty() ? "" : ",") + op;
  }
  if (!missing.empty()) return {r.name, Outcome::kUnsupported, missing};

  std::vector<DType> in_types, out_types;
  for (const Value* v : (*model)->graph->inputs) in_types.push_back(v->dtype);
  for (const Value* v : (*model)->graph->outputs) out_types.push_back(v->dtype);
  SessionOptions options;
  options.num_threads = 1;
  auto session = Session::create(*model, options);
  if (!session.is_ok()) return {r.name, Outcome::kFail, session.status().message()};

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    std::vector<Tensor> inputs, expected;
    for (size_t i = 0; fs::exists(set / ("input_" + std::to_string(i) + ".pb")); ++i) {
      auto t = read_tensor_pb(set / ("input_" + std::to_string(i) + ".pb"), i < in_types.size() ? in_types[i] : DType::kUndefined);
      if (!t.is_ok()) return {r.name, Outcome::kFail, t.status().message()};
      inputs.push_back(std::move(t).value());
    }
    for (size_t i = 0; fs::exists(set / ("output_" + std::to_string(i) + ".pb")); ++i) {
      auto t = read_tensor_pb(set / ("output_" + std::to_string(i) + ".pb"), i < out_types.size() ? out_types[i] : DType::kUndefined);
      if (!t.is_ok()) return {r.name, Outcome::kFail, t.status().message()};
      expected.push_back(std::move(t).value());
    }
    auto outputs = (*session)->run(inputs);
    if (!outputs.is_ok()) return {r.name, Outcome::kFail, outputs.status().message()};
    if (outputs->size() != expected.size()) {
      return {r.name, Outcome::kFail, "produced " + std::to_string(outputs->size()) + " outputs, want " + std::to_string(expected.size())};
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string diff = compare((*outputs)[i], expected[i]);
      if (!diff.empty()) return {r.name, Outcome::kFail, set.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  return r;
}

std::map<std::string, std::string> read_known_failures(const fs::path& path) {
  std::map<std::string, std::string> known;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    known[line.substr(0, colon)] = line.substr(colon + 1 + (colon + 1 < line.size() && line[colon + 1] == ' '));
  }
  return known;
}

void write_report(const fs::path& path, const std::vector<TestResult>& results,
                  const std::map<std::string, std::string>& known, int pass, int fail, int known_fail, int unsupported) {
  std::ofstream out(path);
  out << "# ONNX backend node-test conformance\n\n"
      << "Generated by `og_conformance` (run by `scripts/test`) over Debian's libonnx-testdata (ONNX 1.12) node tests.\n"
      << "Tolerances: float32/64 rtol 1e-3 atol 1e-5; float16 rtol 1e-3 atol 1e-3; bfloat16 rtol 1e-2 atol 1e-2; "
         "integers and bool exact.\n\n"
      << "| result | tests |\n|---|---|\n"
      << "| pass | " << pass << " |\n| fail (listed below with reason) | " << known_fail << " |\n"
      << "| fail (unexpected) | " << fail << " |\n| unsupported (an op not implemented) | " << unsupported << " |\n\n";
  out << "## Failures of implemented ops\n\n";
  for (const auto& r : results) {
    if (r.outcome != Outcome::kFail) continue;
    auto it = known.find(r.name);
    out << "- `" << r.name << "`: " << (it != known.end() ? it->second : "UNEXPECTED: " + r.detail) << "\n";
  }
  std::map<std::string, int> missing;
  for (const auto& r : results) {
    if (r.outcome != Outcome::kUnsupported) continue;
    std::stringstream ss(r.detail);
    std::string op;
    while (std::getline(ss, op, ',')) ++missing[op];
  }
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [op, n] : missing) by_count.emplace_back(n, op);
  std::sort(by_count.rbegin(), by_count.rend());
  out << "\n## Unsupported ops (tests needing them)\n\n";
  for (const auto& [n, op] : by_count) out << "`" << op << "` " << n << " · ";
  out << "\n\n## Passing tests\n\n";
  for (const auto& r : results) {
    if (r.outcome == Outcome::kPass) out << "`" << r.name << "` ";
  }
  out << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  fs::path data = "/usr/share/libonnx-testdata/data/node";
  fs::path known_path = fs::path(__FILE__).parent_path() / "known_failures.txt";
  fs::path report;
  std::string filter;
  int min_pass = 0;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--filter") filter = next();
    else if (arg == "--report") report = next();
    else if (arg == "--known-failures") known_path = next();
    else if (arg == "--min-pass") min_pass = std::stoi(next());
    else if (arg == "--verbose") verbose = true;
    else data = arg;
  }
  if (!fs::is_directory(data)) {
    std::cerr << "og_conformance: test data folder '" << data.string() << "' not found (apt-get install libonnx-testdata)\n";
    return 2;
  }
  const auto known = read_known_failures(known_path);
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(data)) {
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<TestResult> results;
  int pass = 0, fail = 0, known_fail = 0, unsupported = 0;
  for (const fs::path& dir : dirs) {
    TestResult r = run_test(dir);
    switch (r.outcome) {
      case Outcome::kPass: ++pass; break;
      case Outcome::kUnsupported: ++unsupported; break;
      case Outcome::kFail:
        if (known.count(r.name)) {
          ++known_fail;
        } else {
          ++fail;
          std::cout << "FAIL " << r.name << ": " << r.detail << "\n";
        }
        break;
    }
    if (verbose && r.outcome == Outcome::kPass) std::cout << "pass " << r.name << "\n";
    if (verbose && r.outcome == Outcome::kUnsupported) std::cout << "unsupported " << r.name << ": " << r.detail << "\n";
    results.push_back(std::move(r));
  }
  // A listed failure that now passes must be removed from the list, or the list rots.
  for (const auto& r : results) {
    if (r.outcome == Outcome::kPass && known.count(r.name)) {
      std::cout << "FAIL " << r.name << ": passes but is listed in known_failures.txt\n";
      ++fail;
    }
  }
  if (!report.empty()) write_report(report, results, known, pass, fail, known_fail, unsupported);
  std::cout << "conformance: " << pass << " passed, " << fail << " failed, " << known_fail
            << " failed (listed with reason), " << unsupported << " unsupported\n";
  if (pass < min_pass) {
    std::cout << "conformance: fewer than the required " << min_pass << " tests passed\n";
    return 1;
  }
  return fail == 0 ? 0 : 1;
}
