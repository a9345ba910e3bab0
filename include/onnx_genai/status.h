// Errors are values: every fallible call returns Status or Result<T>. A Status carries one
// human-readable line that says what failed and where (file, node, tensor), never a code alone.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace onnx_genai {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefix the message with outer context: "loading model.onnx: <inner message>".
  Status with_context(const std::string& where) const {
    return failed_ ? Status(where + ": " + message_, true) : *this;
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// Either a value or a failed Status (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit like std::expected
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(state_).is_ok() && "Result built from an ok Status");
  }

  bool is_ok() const { return state_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace onnx_genai

#define OG_CONCAT_INNER(a, b) a##b
#define OG_CONCAT(a, b) OG_CONCAT_INNER(a, b)

// Return early from a function returning Status or Result<T> when `expr` fails.
#define OG_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    ::onnx_genai::Status og_status_ = (expr);             \
    if (!og_status_.is_ok()) return og_status_;           \
  } while (0)

// `OG_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result<T> or returns its Status.
#define OG_ASSIGN_OR_RETURN(lhs, expr) OG_ASSIGN_OR_RETURN_IMPL(OG_CONCAT(og_result_, __LINE__), lhs, expr)
#define OG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// Build a failed Status from stream-style pieces: OG_ERROR("node ", name, ": bad axis ", axis).
#include <sstream>
namespace onnx_genai::detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace onnx_genai::detail
#define OG_ERROR(...) ::onnx_genai::Status::error(::onnx_genai::detail::concat(__VA_ARGS__))
