// `onnx-genai exec` arguments: MODEL.onnx [--threads N] [--repeat R] [--dim name=value ...]
// [--input name=file.bin ...] [--max-memory BYTES] [--max-input-bytes N].
#pragma once

#include <map>
#include <span>
#include <string>

#include "onnx_genai/device.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cli {

struct ExecOptions {
  std::string model_path;
  int threads = 0;  // 0 = all cores
  Device device = Device::cpu();
  int repeat = 1;
  std::map<std::string, int64_t> dims;             // symbolic dim name -> value
  std::map<std::string, std::string> input_files;  // input name -> raw little-endian file
  int64_t max_memory = 0;  // bytes of the plan's activation arena; 0 = the physical memory
  // The inputs together, generated or read: checked before they are allocated and filled (a huge
  // --dim took minutes and gigabytes before the plan's own limit could refuse it).
  int64_t max_input_bytes = int64_t{1} << 30;
};

// Parses the arguments after `exec`; errors name the offending argument.
Result<ExecOptions> parse_exec_options(std::span<const std::string> args);

}  // namespace onnx_genai::cli
