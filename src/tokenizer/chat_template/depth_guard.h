// Counts nesting depth for the recursive parser and evaluator; the count is restored on every
// return path, so depth limits hold however a recursion ends.
#pragma once

namespace onnx_genai::chat_template {

class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

}  // namespace onnx_genai::chat_template
