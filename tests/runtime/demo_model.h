// The demo decoder of tools/build_demo_model.py, built on demand for the runtime tests.
#pragma once

#include <filesystem>
#include <string>

#include "oracle_io.h"

namespace onnx_genai::testing {

// File names tools/build_demo_model.py writes: fp32 weights, and fp16 weights Cast to fp32.
inline constexpr const char* kDemoModelF32 = "demo_decoder.onnx";
inline constexpr const char* kDemoModelF16Weights = "demo_decoder_f16w.onnx";
inline constexpr int64_t kDemoVocab = 1000;

// Runs the builder with Debian's python3-onnx/numpy into `dir`.
inline Status build_demo_models(const std::filesystem::path& dir) {
  const std::string command = python() + " " + shell_quote(source_dir() + "/tools/build_demo_model.py") +
                              " " + shell_quote(dir.string());
  OG_ASSIGN_OR_RETURN(CommandResult run, run_command(command, dir.parent_path()));
  if (run.exit_code != 0) return OG_ERROR("tools/build_demo_model.py failed (exit ", run.exit_code, "): ", run.err);
  return Status::ok();
}

// The demo models built once per test binary into a temporary folder.
class DemoModels {
 public:
  static DemoModels& get() {
    static DemoModels models;
    return models;
  }
  const Status& status() const { return status_; }
  std::string path(const std::string& file) const { return (dir_.path() / "models" / file).string(); }

 private:
  DemoModels() {
    status_ = dir_.valid() ? build_demo_models(dir_.path() / "models")
                           : OG_ERROR("cannot create a temporary directory for the demo models");
  }
  ScopedTempDir dir_;
  Status status_;
};

}  // namespace onnx_genai::testing
