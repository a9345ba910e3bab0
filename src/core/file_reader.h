// Reading whole files and streams with a size limit: hostile paths (a directory, /dev/zero, a FIFO
// that never ends) become one-line errors naming the path instead of a bad_alloc or an endless read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "onnx_genai/status.h"

namespace onnx_genai {

// Configs, tokenizer.json and chat templates: far above any real one (the largest tokenizer.json
// files are tens of MB), low enough that a wrong path fails fast.
constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 30;

// What to say when a read passes its limit: "... is larger than the limit of N bytes<hint>", e.g.
// hint " (--max-input-bytes raises it)".
struct ReadLimit {
  int64_t max_bytes = kMaxConfigFileBytes;
  std::string_view hint;
};

// All of `path`; a directory, a missing or unreadable file or more than `limit.max_bytes` bytes is
// an error naming the path (quoted).
Result<std::string> read_file(const std::string& path, ReadLimit limit = {});

// All of the open descriptor `fd` (stdin, a pipe), named `what` in errors.
Result<std::string> read_descriptor(int fd, const std::string& what, ReadLimit limit);

}  // namespace onnx_genai
