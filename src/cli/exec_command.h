// `onnx-genai exec`: load a model, run it on given or generated inputs, print outputs and timing.
#pragma once

#include "cli/exec_options.h"

namespace onnx_genai::cli {

// Prints to stdout; a failure comes back as a Status for the caller to report.
Status run_exec(const ExecOptions& options);

}  // namespace onnx_genai::cli
