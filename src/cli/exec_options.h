// `onnx-genai exec` arguments: MODEL.onnx [--threads N] [--repeat R] [--dim name=value ...]
// [--input name=file.bin ...] [--max-memory BYTES].
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
  int64_t max_memory = 0;  // bytes of one input and of the plan's arena; 0 = the physical memory
};

// Parses the arguments after `exec`; errors name the offending argument.
Result<ExecOptions> parse_exec_options(std::span<const std::string> args);

}  // namespace onnx_genai::cli
