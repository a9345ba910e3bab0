// Per-op results of the differential test and docs/differential.md, which collects them.
//
// Each op's test process writes its result as RESULTS_DIR/<op>.json and then regenerates the
// markdown from every result there, under a file lock, so ops run in parallel by ctest (or one
// at a time) all end up in the report.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::differential {

// Worst errors over the cases of one op in one report group.
struct GroupSummary {
  std::string group;  // dtype, or dtype and a variant (e.g. "f32 accuracy_level=4")
  int cases = 0;
  int measured = 0;  // cases whose outputs were compared (ours ran, dtypes and shapes matched)
  int failed = 0;
  double max_abs = 0;     // max |ours - ort|
  double max_scaled = 0;  // max |ours - ort| / S, S = the output's max |ort|
  std::string worst;      // case with the largest max_scaled, with its parameters
};

struct OpResult {
  std::string op;
  std::vector<GroupSummary> groups;
  int ort_rejected = 0;       // cases ORT refused: a generator bug
  std::string first_failure;  // one line, empty when all passed
};

// Writes `result` into `results_dir` and rewrites `report` from all results there, listing ops
// in `op_order` (ops without a result yet are listed as not run, results without groups as not
// finished).
Status publish_result(const OpResult& result, const std::filesystem::path& results_dir,
                      const std::filesystem::path& report, const std::vector<std::string>& op_order);

}  // namespace onnx_genai::differential
