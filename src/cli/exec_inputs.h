// Inputs for `onnx-genai exec`: read from raw files, or generated deterministically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "onnx_genai/session.h"

namespace onnx_genai::cli {

// One tensor per model input, in `inputs` order. Symbolic dims take their value from `dims`
// (default 1); a name in `dims` that no input uses is an error, as is a file for an unknown input.
// Generated values: integers in [0, 100) (valid token ids for any vocabulary), floats uniform in
// [-1, 1), bools 0/1, all from a fixed seed so every run sees the same inputs. Inputs over
// `max_bytes` together are an error before anything is allocated.
Result<std::vector<Tensor>> build_exec_inputs(const std::vector<IoInfo>& inputs,
                                              const std::map<std::string, int64_t>& dims,
                                              const std::map<std::string, std::string>& files, int64_t max_bytes);

}  // namespace onnx_genai::cli
