// Tree-walking evaluator: a port of @huggingface/jinja's Interpreter, so a template renders to the
// same bytes. Deviations are limits that keep hostile templates from exhausting the process.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"
#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/value.h"

namespace onnx_genai::chat_template {

// A variable scope; loops and macro calls open child scopes.
struct Env {
  explicit Env(std::shared_ptr<Env> parent_scope = nullptr) : parent(std::move(parent_scope)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { variables[name] = std::move(value); }

  std::shared_ptr<Env> parent;
  std::unordered_map<std::string, Value> variables;
};
using EnvPtr = std::shared_ptr<Env>;

struct Limits {
  int max_depth = 400;                   // nested evaluations (expressions, statements, macro calls)
  long long max_steps = 20'000'000;      // evaluated nodes per render
  size_t max_bytes = size_t{64} << 20;   // length of any string (rendered output included)
  size_t max_items = size_t{1} << 20;    // elements of any array
};

class Interpreter {
 public:
  Interpreter(std::string_view source, Limits limits) : source_(source), limits_(limits) {}

  // Renders a kProgram node with `global` as the outermost scope.
  Result<std::string> run(const Node& program, const EnvPtr& global);

  Result<Value> eval(const Node& node, const EnvPtr& env);
  Result<Value> call(const Value& callee, std::vector<Value>& args, const EnvPtr& scope);
  Status check_bytes(size_t size) const;
  Status check_items(size_t count) const;
  const Limits& limits() const { return limits_; }
  // Namespaces are the only mutable values, so the only way to build a reference cycle; run()
  // empties every namespace it saw when it finishes, so cycles cannot leak.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

  // Positional arguments and keyword arguments of a call (the reference's evaluateArguments).
  struct Arguments {
    std::vector<Value> positional;
    Object keyword;
  };
  Result<Arguments> eval_arguments(const std::vector<NodePtr>& args, const EnvPtr& env);

 private:
  enum class Flow { kNone, kBreak, kContinue };

  Result<Value> eval_node(const Node& node, const EnvPtr& env);
  Result<Value> eval_block(const std::vector<NodePtr>& statements, const EnvPtr& env);
  Result<Value> eval_binary(const Node& node, const EnvPtr& env);
  Result<Value> eval_unary(const Node& node, const EnvPtr& env);
  Result<Value> eval_member(const Node& node, const EnvPtr& env);
  Result<Value> eval_slice(const Value& object, const Node& slice, const EnvPtr& env);
  Result<Value> eval_call(const Node& node, const EnvPtr& env);
  Result<Value> eval_test(const Node& node, const EnvPtr& env);
  Result<Value> eval_object_literal(const Node& node, const EnvPtr& env);
  Result<Value> eval_set(const Node& node, const EnvPtr& env);
  Result<Value> eval_for(const Node& node, const EnvPtr& env);
  Result<Value> eval_macro(const Node& node, const EnvPtr& env);
  Result<Value> eval_call_statement(const Node& node, const EnvPtr& env);
  Status bind_macro_arguments(const std::string& display_name, const std::vector<NodePtr>& parameters,
                              bool uses_kwargs, bool uses_varargs, std::vector<Value> args, const EnvPtr& scope);
  Status control_flow(Flow flow);
  Status charge_step();
  Status locate(const Status& status, const Node& node);

  std::string_view source_;
  Limits limits_;
  int depth_ = 0;
  long long steps_ = 0;
  Flow pending_flow_ = Flow::kNone;
  bool error_located_ = false;
  std::vector<Value> namespaces_;
};

// filters.cc: `operand | filter` where `filter` is an identifier or a call.
Result<Value> apply_filter(Interpreter& interpreter, const Value& operand, const Node& filter, const EnvPtr& env);

// builtins.cc
// Member of a string/array/object that is not a stored key: methods like "upper", "items".
Value builtin_member(const Value& object, const std::string& name);
// `operand is name`; `argument` is the second operand that selectattr passes (may be null).
Result<bool> run_test(const std::string& name, const Value& operand, const Value* argument);
bool is_known_test(const std::string& name);
// The globals Template.render installs: true/false/none, namespace, range, raise_exception, strftime_now.
void install_globals(Env& env);
// str.replace(old, new[, count]) as the reference's `replace` helper does it.
Result<Value> string_replace(const std::string& text, const std::vector<Value>& args);
// Error message prefix of exceptions the template raises with raise_exception().
inline constexpr std::string_view kRaisedPrefix = "raise_exception: ";

}  // namespace onnx_genai::chat_template
