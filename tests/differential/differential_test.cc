// Differential test: every com.microsoft op and opset-23 LLM op, ours against ONNX Runtime, on
// 200 random single-node models per op. One parameterised test per op:
//   1. tests/differential/cases.py writes the op's cases (model, inputs, masks of the output
//      elements ORT defines) into a temporary folder;
//   2. tests/oracle/ort_run.mjs --batch runs them all in one Node process (cases of variants ORT
//      does not implement carry their generator's float64 outputs instead, and skip ORT);
//   3. our Session (2 threads) runs each case; every output is compared with ORT's;
//   4. per dtype (or dtype and variant): cases, failures, max abs error, max error relative to
//      the output's scale and the worst case are printed and merged into docs/differential.md.
// Tolerances per dtype are documented in compare.h.
//
// Environment:
//   CASES=Op[,Op/Case...]   run only these ops, or single cases (MatMulNBits/MatMulNBits_017);
//                           other ops skip. Runs restricted to cases leave the report alone.
//   DIFFERENTIAL_KEEP=DIR   write the cases into DIR and keep them (rerun ORT or python by hand)
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "compare.h"
#include "differential_report.h"
#include "onnx_genai/session.h"
#include "oracle_io.h"

namespace onnx_genai::differential {
namespace {

namespace fs = std::filesystem;

// Test names of the ops, as tests/differential/cases.py --list knows them.
const std::vector<std::string> kOps = {
    "MatMulNBits",        "GroupQueryAttention",          "MultiHeadAttention",
    "Attention23",        "SimplifiedLayerNormalization", "RMSNormalization23",
    "LayerNormalization", "SkipSimplifiedLayerNormalization",
    "SkipLayerNormalization",
    "RotaryEmbedding",    "RotaryEmbedding23",            "GatherBlockQuantized",
    "FastGelu",           "QuickGelu",                    "BiasGelu",
    "MoE",                "QMoE"};

constexpr int kSessionThreads = 2;
constexpr int kFailuresShown = 8;

struct CaseSpec {
  std::string name, op, group, describe;
  double extra_abs_tolerance = 0;
  std::map<int, std::string> masks;  // output index -> mask file in the case folder
  bool float64_reference = false;    // expected outputs in the case's expected/, not from ORT
};

// CASES: which ops run, and (when given as Op/Case) which of their cases.
struct Selection {
  bool all = true;
  std::map<std::string, std::set<std::string>> ops;  // op -> cases (empty: all of them)

  static Selection from_environment() {
    Selection s;
    const char* env = std::getenv("CASES");
    if (env == nullptr || *env == '\0') return s;
    s.all = false;
    std::stringstream list(env);
    std::string item;
    while (std::getline(list, item, ',')) {
      const auto slash = item.find('/');
      auto& cases = s.ops[item.substr(0, slash)];
      if (slash != std::string::npos) cases.insert(item.substr(slash + 1));
    }
    return s;
  }
  bool runs(const std::string& op) const { return all || ops.count(op) != 0; }
  std::set<std::string> cases_of(const std::string& op) const { return all ? std::set<std::string>{} : ops.at(op); }
};

std::string reproduce_command(const std::string& op, const std::string& case_name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return "CASES=" + op + "/" + case_name + " " + (ec ? std::string("differential_tests") : self.string()) +
         " --gtest_filter='*/" + op + "'  (DIFFERENTIAL_KEEP=DIR keeps its files)";
}

Result<std::vector<CaseSpec>> generate_cases(const std::string& op, const std::set<std::string>& only,
                                             const fs::path& dir) {
  const std::string script = testing::source_dir() + "/tests/differential/cases.py";
  std::string command = "/usr/bin/python3 -B " + testing::shell_quote(script) + " " + testing::shell_quote(dir.string()) +
                        " --op " + op;
  for (const std::string& c : only) command += " --case " + testing::shell_quote(c);
  OG_ASSIGN_OR_RETURN(testing::CommandResult run, testing::run_command(command, dir));
  if (run.exit_code != 0) return OG_ERROR("cases.py failed (exit ", run.exit_code, "): ", run.err);
  OG_ASSIGN_OR_RETURN(std::string text, testing::read_text_file(dir / "cases.json"));
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) return OG_ERROR("cases.json is not a JSON array");
  std::vector<CaseSpec> cases;
  for (const auto& entry : json) {
    CaseSpec c{entry.value("name", ""), entry.value("op", ""), entry.value("group", ""), entry.value("describe", ""),
               entry.value("extra_abs_tolerance", 0.0), {}};
    const nlohmann::json masks = entry.value("masks", nlohmann::json::object());
    for (const auto& [index, file] : masks.items()) {
      c.masks[std::stoi(index)] = file.get<std::string>();
    }
    c.float64_reference = entry.value("reference", "") == "float64";
    cases.push_back(std::move(c));
  }
  return cases;
}

Result<std::vector<Tensor>> run_ours(const fs::path& case_dir) {
  OG_ASSIGN_OR_RETURN(std::vector<testing::NamedTensor> inputs, testing::read_tensor_dir(case_dir / "in"));
  SessionOptions options;
  options.num_threads = kSessionThreads;
  OG_ASSIGN_OR_RETURN(auto session, Session::load((case_dir / "model.onnx").string(), options));
  std::map<std::string, Tensor> feeds;
  for (auto& [name, tensor] : inputs) feeds.emplace(name, std::move(tensor));
  return session->run_named(feeds);
}

Result<std::vector<uint8_t>> read_mask(const fs::path& file, int64_t numel) {
  OG_ASSIGN_OR_RETURN(std::string bytes, testing::read_text_file(file));
  if (static_cast<int64_t>(bytes.size()) != numel) {
    return OG_ERROR(file.string(), " has ", bytes.size(), " bytes for an output of ", numel, " elements");
  }
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

struct CaseOutcome {
  std::string failure;    // empty when every output is within tolerance
  bool measured = false;  // outputs were compared (ours ran and matched ORT's dtypes and shapes)
  double max_abs = 0, max_scaled = 0;
};

// Names the case being run if our Session crashes on it (a crash ends the whole test process).
class CrashReporter {
 public:
  CrashReporter() {
    for (int sig : kSignals) std::signal(sig, on_signal);
  }
  ~CrashReporter() {
    for (int sig : kSignals) std::signal(sig, SIG_DFL);
  }
  CrashReporter(const CrashReporter&) = delete;
  CrashReporter& operator=(const CrashReporter&) = delete;
  static void running(const CaseSpec& spec) {
    std::snprintf(message_, sizeof message_, "\ndifferential: crashed in %s [%s]\n    reproduce: %s\n", spec.name.c_str(),
                  spec.describe.c_str(), reproduce_command(spec.op, spec.name).c_str());
  }

 private:
  static constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  static void on_signal(int sig) {
    const ssize_t ignored = ::write(STDERR_FILENO, message_, std::strlen(message_));
    (void)ignored;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  static inline char message_[1024] = "";
};

// `text` with every occurrence of `prefix` removed.
std::string without_prefix(std::string text, const std::string& prefix) {
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) text.erase(at, prefix.size());
  return text;
}

std::string describe_mismatch(size_t index, const std::string& name, const Comparison& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "output %zu '%s' element %lld: ours %.9g, ort %.9g, |diff| %.3g > tolerance %.3g (scale %.3g)",
                index, name.c_str(), static_cast<long long>(c.first_bad), c.bad_ours, c.bad_ort,
                std::fabs(c.bad_ours - c.bad_ort), c.bad_tolerance, c.scale);
  return buf;
}

CaseOutcome compare_case(const CaseSpec& spec, const fs::path& case_dir, const std::vector<Tensor>& ours,
                         const std::vector<testing::NamedTensor>& ort) {
  CaseOutcome outcome;
  if (ours.size() != ort.size()) {
    outcome.failure = "ours has " + std::to_string(ours.size()) + " outputs, ORT " + std::to_string(ort.size());
    return outcome;
  }
  for (size_t i = 0; i < ort.size() && outcome.failure.empty(); ++i) {
    const Tensor& want = ort[i].tensor;
    if (ours[i].dtype() != want.dtype() || ours[i].shape() != want.shape()) {
      outcome.failure = "output " + std::to_string(i) + " '" + ort[i].name + "': ours " +
                        std::string(dtype_name(ours[i].dtype())) + ours[i].shape().to_string() + ", ORT " +
                        std::string(dtype_name(want.dtype())) + want.shape().to_string();
      break;
    }
    std::vector<uint8_t> mask;
    if (const auto it = spec.masks.find(static_cast<int>(i)); it != spec.masks.end()) {
      auto read = read_mask(case_dir / it->second, want.numel());
      if (!read.is_ok()) {
        outcome.failure = read.status().message();
        break;
      }
      mask = std::move(read).value();
    }
    const Comparison c = compare_output(ours[i], want, mask, tolerance_for(want.dtype(), spec.extra_abs_tolerance));
    outcome.measured = true;
    outcome.max_abs = std::max(outcome.max_abs, c.max_abs);
    outcome.max_scaled = std::max(outcome.max_scaled, c.max_scaled());
    if (!c.ok()) outcome.failure = describe_mismatch(i, ort[i].name, c);
  }
  return outcome;
}

// Accumulates per-group worst errors and the failures to show.
class Tally {
 public:
  void add(const CaseSpec& spec, const CaseOutcome& outcome) {
    GroupSummary& d = summary(spec.group);
    ++d.cases;
    d.measured += outcome.measured ? 1 : 0;
    d.max_abs = std::max(d.max_abs, outcome.max_abs);
    if (outcome.measured && outcome.max_scaled >= d.max_scaled) {
      d.max_scaled = outcome.max_scaled;
      d.worst = spec.name + " (" + spec.describe + ")";
    }
    if (outcome.failure.empty()) return;
    ++d.failed;
    ++failed_;
    if (result_.first_failure.empty()) result_.first_failure = spec.name + ": " + outcome.failure;
    if (failed_ <= kFailuresShown) {
      shown_ += spec.name + " [" + spec.describe + "]\n    " + outcome.failure + "\n    reproduce: " +
                reproduce_command(spec.op, spec.name) + "\n";
    }
  }
  void ort_rejected() { ++result_.ort_rejected; }

  OpResult result(const std::string& op) const {
    OpResult r = result_;
    r.op = op;
    std::sort(r.groups.begin(), r.groups.end(),
              [](const GroupSummary& a, const GroupSummary& b) { return a.group < b.group; });
    if (failed_ > 0) {
      r.first_failure = std::to_string(failed_) + " of " + std::to_string(cases()) + " cases fail; first: " + r.first_failure;
    }
    return r;
  }
  int failed() const { return failed_; }
  int cases() const {
    int n = 0;
    for (const GroupSummary& d : result_.groups) n += d.cases;
    return n;
  }
  const std::string& shown() const { return shown_; }

 private:
  GroupSummary& summary(const std::string& group) {
    for (GroupSummary& d : result_.groups) {
      if (d.group == group) return d;
    }
    result_.groups.push_back({group});
    return result_.groups.back();
  }

  OpResult result_;
  int failed_ = 0;
  std::string shown_;
};

// Per case, the outputs to compare with: ONNX Runtime's (all cases run in one Node process), or
// for cases with a float64 reference the generator's, from the case's expected/ folder.
Result<std::vector<Result<std::vector<testing::NamedTensor>>>> references(const std::vector<CaseSpec>& cases,
                                                                          const fs::path& dir) {
  std::vector<testing::OrtBatchCase> batch;
  for (const CaseSpec& c : cases) {
    if (!c.float64_reference) batch.push_back({(dir / c.name / "model.onnx").string(), dir / c.name / "in", dir / c.name / "out"});
  }
  std::vector<Result<std::vector<testing::NamedTensor>>> ort;
  if (!batch.empty()) {
    OG_ASSIGN_OR_RETURN(ort, testing::run_onnx_runtime_batch(batch, dir));
  }
  std::vector<Result<std::vector<testing::NamedTensor>>> out;
  size_t next = 0;
  for (const CaseSpec& c : cases) {
    out.push_back(c.float64_reference ? testing::read_tensor_dir(dir / c.name / "expected") : std::move(ort[next++]));
  }
  return out;
}

class Differential : public ::testing::TestWithParam<std::string> {};

TEST_P(Differential, MatchesOnnxRuntime) {
  const std::string op = GetParam();
  const Selection selection = Selection::from_environment();
  if (!selection.runs(op)) GTEST_SKIP() << "not selected by CASES";
  const auto started = std::chrono::steady_clock::now();

  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const char* keep = std::getenv("DIFFERENTIAL_KEEP");
  const fs::path dir = keep != nullptr && *keep != '\0' ? fs::path(keep) / op : scratch.path() / op;
  std::error_code ec;
  fs::create_directories(dir, ec);
  ASSERT_FALSE(ec) << "cannot create " << dir << ": " << ec.message();

  const bool publishes = selection.cases_of(op).empty();  // runs of single cases leave the report alone
  if (publishes) {
    // Replaced when the op finishes; stays in the report if our Session crashes the process.
    const OpResult unfinished{op, {}, 0, "did not finish: setup failed or the test process crashed (see its log)"};
    const Status published = publish_result(unfinished, OG_DIFFERENTIAL_RESULTS, OG_DIFFERENTIAL_REPORT, kOps);
    ASSERT_TRUE(published.is_ok()) << published.message();
  }
  auto cases = generate_cases(op, selection.cases_of(op), dir);
  ASSERT_TRUE(cases.is_ok()) << cases.status().message();
  ASSERT_FALSE(cases->empty()) << "no cases selected for " << op;
  auto ort = references(*cases, dir);
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  Tally tally;
  CrashReporter crash_reporter;
  for (size_t i = 0; i < cases->size(); ++i) {
    const CaseSpec& spec = (*cases)[i];
    const auto& reference = (*ort)[i];
    if (!reference.is_ok()) {
      tally.ort_rejected();
      ADD_FAILURE() << spec.name << " [" << spec.describe << "]: a generator bug: " << reference.status().message();
      continue;
    }
    CrashReporter::running(spec);
    auto ours = run_ours(dir / spec.name);
    CaseOutcome outcome = ours.is_ok() ? compare_case(spec, dir / spec.name, *ours, *reference)
                                       : CaseOutcome{"our Session failed: " + ours.status().message()};
    outcome.failure = without_prefix(outcome.failure, dir.string() + "/");  // the report stays the same across runs
    tally.add(spec, outcome);
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const OpResult result = tally.result(op);
  for (const GroupSummary& d : result.groups) {
    std::printf("[ differ   ] %s %s: %d cases, %d failed, max abs %.3g, max abs/scale %.3g, worst %s\n", op.c_str(),
                d.group.c_str(), d.cases, d.failed, d.max_abs, d.max_scaled, d.worst.c_str());
  }
  std::printf("[ differ   ] %s: %.1f s\n", op.c_str(), seconds);
  if (publishes) {
    const Status published = publish_result(result, OG_DIFFERENTIAL_RESULTS, OG_DIFFERENTIAL_REPORT, kOps);
    EXPECT_TRUE(published.is_ok()) << published.message();
  }
  EXPECT_EQ(tally.failed(), 0) << tally.failed() << " of " << tally.cases() << " " << op
                               << " cases differ from ONNX Runtime; the first ones:\n" << tally.shown();
}

INSTANTIATE_TEST_SUITE_P(Ops, Differential, ::testing::ValuesIn(kOps),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace onnx_genai::differential
