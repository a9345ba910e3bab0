// A non-owning reference to a callable, like std::function_ref (C++26): passing a lambda
// never allocates, which keeps kernels that call parallel_for allocation-free at run time.
// The callable must outlive the reference (it always does for a blocking parallel_for).
#pragma once

#include <type_traits>
#include <utility>

namespace onnx_genai {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit, like a function parameter of callable type
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace onnx_genai
