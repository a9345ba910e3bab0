#include "core/file_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace onnx_genai {

namespace {

// Closes the descriptor it was given when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

Result<std::string> read_descriptor(int fd, const std::string& what, ReadLimit limit) {
  std::string text;
  constexpr size_t kChunk = size_t{1} << 16;
  while (true) {
    const size_t old_size = text.size();
    // Read in chunks, never trusting a size the file reports (devices and FIFOs report none).
    text.resize(old_size + kChunk);
    const ssize_t got = ::read(fd, text.data() + old_size, kChunk);
    if (got < 0 && errno == EINTR) {
      text.resize(old_size);
      continue;
    }
    if (got < 0) return OG_ERROR("cannot read ", what, ": ", std::strerror(errno));
    text.resize(old_size + static_cast<size_t>(got));
    if (got == 0) return text;
    if (static_cast<int64_t>(text.size()) > limit.max_bytes) {
      return OG_ERROR(what, " is larger than the limit of ", limit.max_bytes, " bytes", limit.hint);
    }
  }
}

Result<std::string> read_file(const std::string& path, ReadLimit limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OG_ERROR("cannot open '", path, "': ", std::strerror(errno));
  const FdCloser closer{fd};
  return read_descriptor(fd, "'" + path + "'", limit);
}

}  // namespace onnx_genai
