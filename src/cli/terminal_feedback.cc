#include "cli/terminal_feedback.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace onnx_genai::cli {

namespace {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) != 0; }

// Draws "loading DIR |" with a turning bar from one second after construction until destroyed,
// then erases the line. Loads that finish within the second print nothing.
class LoadSpinner {
 public:
  explicit LoadSpinner(std::string dir) : dir_(std::move(dir)), thread_([this] { draw(); }) {}
  ~LoadSpinner() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  LoadSpinner(const LoadSpinner&) = delete;
  LoadSpinner& operator=(const LoadSpinner&) = delete;

 private:
  void draw() {
    constexpr char kFrames[] = {'|', '/', '-', '\\'};
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) return;
    for (size_t frame = 0; !done_; ++frame) {
      std::fprintf(stderr, "\rloading %s %c", dir_.c_str(), kFrames[frame % 4]);
      std::fflush(stderr);
      wake_.wait_for(lock, std::chrono::milliseconds(120), [this] { return done_; });
    }
    std::fputs("\r\033[K", stderr);  // carriage return, erase to end of line
    std::fflush(stderr);
  }

  std::string dir_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the members it reads are ready
};

}  // namespace

Result<std::unique_ptr<genai::Model>> load_model_with_progress(const std::string& dir, const genai::ModelOptions& options) {
  Result<std::unique_ptr<genai::Model>> model = [&] {
    if (!stderr_is_terminal()) return genai::Model::load(dir, options);
    LoadSpinner spinner(dir);
    return genai::Model::load(dir, options);
  }();
  if (!model.is_ok()) return model;
  if (!(*model)->device_fallback().empty()) {
    std::fprintf(stderr, "onnx-genai: warning: %s; running on the CPU\n", (*model)->device_fallback().c_str());
  }
  for (const std::string& warning : (*model)->info().warnings) {
    std::fprintf(stderr, "onnx-genai: warning: %s\n", warning.c_str());
  }
  return model;
}

void print_reply_stats_line(const genai::GenerationStats& stats, size_t generated_tokens, const PromptReuse* reuse) {
  if (!stderr_is_terminal()) return;
  const double rate = stats.decode_seconds > 0 ? static_cast<double>(stats.decode_tokens) / stats.decode_seconds : 0.0;
  std::fprintf(stderr, "[%zu tokens · %.1f tok/s · TTFT %.0f ms", generated_tokens, rate, stats.prefill_seconds * 1e3);
  if (reuse != nullptr) std::fprintf(stderr, " · prompt %zu cached + %zu new", reuse->reused, reuse->prefilled);
  std::fprintf(stderr, "]\n");
}

}  // namespace onnx_genai::cli
