#include "tokenizer/chat_template/interpreter.h"

#include <cmath>
#include <set>

#include "tokenizer/chat_template/depth_guard.h"
#include "tokenizer/chat_template/lexer.h"
#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

const Value* Env::lookup(const std::string& name) const {
  for (const Env* env = this; env != nullptr; env = env->parent.get()) {
    auto it = env->variables.find(name);
    if (it != env->variables.end()) return &it->second;
  }
  return nullptr;
}

namespace {

// findAccessedSpecialMacroArguments: which of `kwargs` / `varargs` a macro body reads without
// declaring them; only those are bound (otherwise extra arguments are an error).
class SpecialArgumentScan {
 public:
  std::set<std::string> declared, accessed;

  void declare_parameters(const std::vector<NodePtr>& parameters) {
    for (const NodePtr& p : parameters) declare(p->text);
  }
  void visit_defaults(const std::vector<NodePtr>& parameters) {
    for (const NodePtr& p : parameters) {
      if (p->kind == NodeKind::kKeywordArgument) visit(p->a.get());
    }
  }
  void visit_all(const std::vector<NodePtr>& nodes) {
    for (const NodePtr& n : nodes) visit(n.get());
  }
  void visit(const Node* node) {
    if (node == nullptr) return;
    switch (node->kind) {
      case NodeKind::kFor:
        declare_target(*node->a);
        if (node->b->kind == NodeKind::kSelect) {
          visit(node->b->a.get());
          visit_all(node->body);
          visit_all(node->alternate);
          visit(node->b->b.get());
          return;
        }
        visit(node->b.get());
        visit_all(node->body);
        visit_all(node->alternate);
        return;
      case NodeKind::kSet:
        declare_target(*node->a);
        visit(node->b.get());
        visit_all(node->body);
        return;
      case NodeKind::kMacro:
        declare_parameters(node->list);
        visit_defaults(node->list);
        visit_all(node->body);
        return;
      case NodeKind::kCallStatement:
        visit(node->a.get());
        declare_parameters(node->list);
        visit_defaults(node->list);
        visit_all(node->body);
        return;
      case NodeKind::kFilterStatement:
        visit_all(node->body);
        visit_filter(*node->a);
        return;
      case NodeKind::kIdentifier:
        if (is_special(node->text) && !declared.count(node->text)) accessed.insert(node->text);
        return;
      case NodeKind::kMember:
        visit(node->a.get());
        if (node->computed) visit(node->b.get());
        return;
      case NodeKind::kFilter:
        visit(node->a.get());
        visit_filter(*node->b);
        return;
      case NodeKind::kTest: visit(node->a.get()); return;
      case NodeKind::kSelect:
        visit(node->b.get());
        visit(node->a.get());
        return;
      case NodeKind::kKeywordArgument: visit(node->a.get()); return;
      default:
        visit(node->a.get());
        visit(node->b.get());
        visit(node->c.get());
        visit_all(node->list);
        visit_all(node->body);
        visit_all(node->alternate);
        for (const auto& [key, value] : node->pairs) {
          visit(key.get());
          visit(value.get());
        }
    }
  }

 private:
  static bool is_special(const std::string& name) { return name == "kwargs" || name == "varargs"; }
  void declare(const std::string& name) {
    if (is_special(name)) declared.insert(name);
  }
  void declare_target(const Node& target) {
    if (target.kind == NodeKind::kIdentifier) declare(target.text);
    if (target.kind == NodeKind::kTupleLiteral) {
      for (const NodePtr& item : target.list) declare_target(*item);
    }
  }
  void visit_filter(const Node& filter) {
    if (filter.kind == NodeKind::kCall) visit_all(filter.list);
  }
};

bool is_numeric_like(const Value& v) { return v.is_number() || v.is(Kind::kBool); }
double numeric_value(const Value& v) { return v.is(Kind::kBool) ? (v.as_bool() ? 1 : 0) : v.as_number(); }

// The reference's slice(): Python slicing clamped like Array.prototype.slice.
template <typename T>
std::vector<T> slice_items(const std::vector<T>& items, const Value& start_value, const Value& stop_value,
                           const Value& step_value) {
  const double length = static_cast<double>(items.size());
  const double step = step_value.is(Kind::kUndefined) ? 1 : step_value.as_number();
  const double direction = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start, stop;
  if (direction >= 0) {
    start = start_value.is(Kind::kUndefined) ? 0 : start_value.as_number();
    start = start < 0 ? std::max(length + start, 0.0) : std::min(start, length);
    stop = stop_value.is(Kind::kUndefined) ? length : stop_value.as_number();
    stop = stop < 0 ? std::max(length + stop, 0.0) : std::min(stop, length);
  } else {
    start = start_value.is(Kind::kUndefined) ? length - 1 : start_value.as_number();
    start = start < 0 ? std::max(length + start, -1.0) : std::min(start, length - 1);
    stop = stop_value.is(Kind::kUndefined) ? -1 : stop_value.as_number();
    stop = stop < -1 ? std::max(length + stop, -1.0) : std::min(stop, length - 1);
  }
  std::vector<T> out;
  if (direction == 0 || std::isnan(start) || std::isnan(stop) || std::isnan(step)) return out;
  for (double i = start; direction * i < direction * stop; i += step) {
    if (i >= 0 && i < length) out.push_back(items[static_cast<size_t>(i)]);
  }
  return out;
}

// Jinja2's loop.cycle(*values): the value at this iteration's index, modulo their count.
Value loop_cycle(size_t index) {
  return Value::function([index](Interpreter&, std::vector<Value>& args, const EnvPtr&) -> Result<Value> {
    if (!args.empty() && args.back().is(Kind::kKwargs)) return OG_ERROR("loop.cycle() takes no keyword arguments");
    if (args.empty()) return OG_ERROR("loop.cycle(): no items for cycling given");
    return args[index % args.size()];
  });
}

}  // namespace

Result<std::string> Interpreter::run(const Node& program, const EnvPtr& global) {
  depth_ = 0;
  steps_ = 0;
  pending_flow_ = Flow::kNone;
  error_located_ = false;
  Result<Value> result = eval_block(program.body, global);
  for (Value& ns : namespaces_) ns.mutable_object().mutable_entries().clear();
  namespaces_.clear();
  if (!result.is_ok()) return result.status();
  return result->as_string();
}

Status Interpreter::check_bytes(size_t size) const {
  return size > limits_.max_bytes ? OG_ERROR("string exceeds the limit of ", limits_.max_bytes, " bytes") : Status::ok();
}

Status Interpreter::check_items(size_t count) const {
  return count > limits_.max_items ? OG_ERROR("array exceeds the limit of ", limits_.max_items, " items") : Status::ok();
}

Status Interpreter::locate(const Status& status, const Node& node) {
  if (error_located_) return status;
  error_located_ = true;
  return OG_ERROR("chat template ", describe_location(source_, node.offset), ": ", status.message());
}

Status Interpreter::charge_step() {
  return ++steps_ > limits_.max_steps ? OG_ERROR("rendering exceeds ", limits_.max_steps, " steps") : Status::ok();
}

Status Interpreter::control_flow(Flow flow) {
  pending_flow_ = flow;
  return OG_ERROR(flow == Flow::kBreak ? "'break'" : "'continue'", " outside of a for loop");
}

Result<Value> Interpreter::eval(const Node& node, const EnvPtr& env) {
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth) {
    return locate(OG_ERROR("evaluation nests deeper than ", limits_.max_depth, " levels (runaway recursion?)"), node);
  }
  if (Status step = charge_step(); !step.is_ok()) return locate(step, node);
  Result<Value> result = eval_node(node, env);
  if (!result.is_ok()) return locate(result.status(), node);
  return result;
}

Result<Value> Interpreter::eval_node(const Node& node, const EnvPtr& env) {
  switch (node.kind) {
    case NodeKind::kProgram: return eval_block(node.body, env);
    case NodeKind::kText:
    case NodeKind::kStringLiteral: return Value::string(node.text);
    case NodeKind::kComment: return Value::null();
    case NodeKind::kIntegerLiteral: return Value::integer(node.number);
    case NodeKind::kFloatLiteral: return Value::floating(node.number);
    case NodeKind::kArrayLiteral:
    case NodeKind::kTupleLiteral: {
      Array items;
      for (const NodePtr& item : node.list) {
        OG_ASSIGN_OR_RETURN(Value value, eval(*item, env));
        items.push_back(std::move(value));
      }
      return Value::array(std::move(items), node.kind == NodeKind::kArrayLiteral ? Kind::kArray : Kind::kTuple);
    }
    case NodeKind::kObjectLiteral: return eval_object_literal(node, env);
    case NodeKind::kIdentifier: {
      const Value* value = env->lookup(node.text);
      return value ? *value : Value();
    }
    case NodeKind::kBinary: return eval_binary(node, env);
    case NodeKind::kUnary: return eval_unary(node, env);
    case NodeKind::kMember: return eval_member(node, env);
    case NodeKind::kCall: return eval_call(node, env);
    case NodeKind::kFilter: {
      OG_ASSIGN_OR_RETURN(Value operand, eval(*node.a, env));
      return apply_filter(*this, operand, *node.b, env);
    }
    case NodeKind::kFilterStatement: {
      OG_ASSIGN_OR_RETURN(Value rendered, eval_block(node.body, env));
      return apply_filter(*this, rendered, *node.a, env);
    }
    case NodeKind::kTest: return eval_test(node, env);
    case NodeKind::kSelect: {
      OG_ASSIGN_OR_RETURN(Value condition, eval(*node.b, env));
      if (!truthy(condition)) return Value();
      return eval(*node.a, env);
    }
    case NodeKind::kTernary: {
      OG_ASSIGN_OR_RETURN(Value condition, eval(*node.a, env));
      return eval(truthy(condition) ? *node.b : *node.c, env);
    }
    case NodeKind::kIf: {
      OG_ASSIGN_OR_RETURN(Value test, eval(*node.a, env));
      return eval_block(truthy(test) ? node.body : node.alternate, env);
    }
    case NodeKind::kSet: return eval_set(node, env);
    case NodeKind::kFor: return eval_for(node, env);
    case NodeKind::kMacro: return eval_macro(node, env);
    case NodeKind::kCallStatement: return eval_call_statement(node, env);
    case NodeKind::kBreak: return control_flow(Flow::kBreak);
    case NodeKind::kContinue: return control_flow(Flow::kContinue);
    default: return OG_ERROR("Unknown node type");
  }
}

Result<Value> Interpreter::eval_block(const std::vector<NodePtr>& statements, const EnvPtr& env) {
  std::string out;
  for (const NodePtr& statement : statements) {
    OG_ASSIGN_OR_RETURN(Value value, eval(*statement, env));
    if (value.is_nullish()) continue;
    if (value.is(Kind::kString)) {
      out += value.as_string();
    } else {
      OG_ASSIGN_OR_RETURN(std::string text, to_display_string(value));
      out += text;
    }
    OG_RETURN_IF_ERROR(check_bytes(out.size()));
  }
  return Value::string(std::move(out));
}

Result<Value> Interpreter::eval_object_literal(const Node& node, const EnvPtr& env) {
  Object map;
  for (const auto& [key_node, value_node] : node.pairs) {
    OG_ASSIGN_OR_RETURN(Value key, eval(*key_node, env));
    if (!key.is(Kind::kString)) return OG_ERROR("Object keys must be strings: got ", kind_name(key.kind()));
    OG_ASSIGN_OR_RETURN(Value value, eval(*value_node, env));
    map.set(key.as_string(), std::move(value));
  }
  return Value::object(std::move(map));
}

Result<Value> Interpreter::eval_binary(const Node& node, const EnvPtr& env) {
  const std::string& op = node.text;
  OG_ASSIGN_OR_RETURN(Value left, eval(*node.a, env));
  if (op == "and") return truthy(left) ? eval(*node.b, env) : Result<Value>(left);
  if (op == "or") return truthy(left) ? Result<Value>(left) : eval(*node.b, env);
  OG_ASSIGN_OR_RETURN(Value right, eval(*node.b, env));
  if (op == "==") return Value::boolean(loose_equals(left, right));
  if (op == "!=") return Value::boolean(!loose_equals(left, right));
  const bool membership = op == "in" || op == "not in";
  if (left.is(Kind::kUndefined) || right.is(Kind::kUndefined)) {
    if (right.is(Kind::kUndefined) && membership) return Value::boolean(op == "not in");
    return OG_ERROR("Cannot perform operation ", op, " on undefined values");
  }
  if (left.is(Kind::kNull) || right.is(Kind::kNull)) return OG_ERROR("Cannot perform operation on null values");
  if (op == "~") {
    OG_ASSIGN_OR_RETURN(std::string a, to_js_string(left));
    OG_ASSIGN_OR_RETURN(std::string b, to_js_string(right));
    OG_RETURN_IF_ERROR(check_bytes(a.size() + b.size()));
    return Value::string(a + b);
  }
  if (op == "**" && is_numeric_like(left) && is_numeric_like(right)) {
    const double a = numeric_value(left), b = numeric_value(right);
    if (a == 0 && b < 0) return OG_ERROR("0.0 cannot be raised to a negative power");
    const double result = std::pow(a, b);
    if (!std::isfinite(result)) return OG_ERROR("Exponentiation result is not a finite real number");
    const bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat) || b < 0;
    return is_float ? Value::floating(result) : Value::integer(result);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.as_number(), b = right.as_number();
    const bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat);
    const auto number = [&](double x) { return is_float ? Value::floating(x) : Value::integer(x); };
    if (op == "+") return number(a + b);
    if (op == "-") return number(a - b);
    if (op == "*") return number(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return number(std::floor(a / b));
    if (op == "%") return number(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "<=") return Value::boolean(a <= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      OG_RETURN_IF_ERROR(check_items(left.as_array().size() + right.as_array().size()));
      Array joined = left.as_array();
      joined.insert(joined.end(), right.as_array().begin(), right.as_array().end());
      return Value::array(std::move(joined));
    }
  } else if (right.is_array() && membership) {
    bool found = false;
    for (const Value& item : right.as_array()) found = found || strict_equals(item, left);
    return Value::boolean(found == (op == "in"));
  }
  if ((left.is(Kind::kString) || right.is(Kind::kString)) && op == "+") {
    OG_ASSIGN_OR_RETURN(std::string a, to_js_string(left));
    OG_ASSIGN_OR_RETURN(std::string b, to_js_string(right));
    OG_RETURN_IF_ERROR(check_bytes(a.size() + b.size()));
    return Value::string(a + b);
  }
  if (left.is(Kind::kString) && right.is(Kind::kString) && membership) {
    return Value::boolean((right.as_string().find(left.as_string()) != std::string::npos) == (op == "in"));
  }
  if (left.is(Kind::kString) && right.is_object() && membership) {
    return Value::boolean((right.as_object().find(left.as_string()) != nullptr) == (op == "in"));
  }
  return OG_ERROR("Unknown operator \"", op, "\" between ", kind_name(left.kind()), " and ", kind_name(right.kind()));
}

Result<Value> Interpreter::eval_unary(const Node& node, const EnvPtr& env) {
  OG_ASSIGN_OR_RETURN(Value argument, eval(*node.a, env));
  if (node.text == "not") return Value::boolean(!truthy(argument));
  if (!is_numeric_like(argument)) {
    return OG_ERROR("Unknown operator \"", node.text, "\" for ", kind_name(argument.kind()));
  }
  const double result = (node.text == "-" ? -1 : 1) * numeric_value(argument);
  return argument.is(Kind::kFloat) ? Value::floating(result) : Value::integer(result);
}

Result<Value> Interpreter::eval_member(const Node& node, const EnvPtr& env) {
  OG_ASSIGN_OR_RETURN(Value object, eval(*node.a, env));
  Value property;
  if (node.computed) {
    if (node.b->kind == NodeKind::kSlice) return eval_slice(object, *node.b, env);
    OG_ASSIGN_OR_RETURN(property, eval(*node.b, env));
  } else if (node.b->kind == NodeKind::kIntegerLiteral) {
    property = Value::integer(node.b->number);
  } else {
    property = Value::string(node.b->text);
  }
  if (object.is_attribute_container()) {
    if (!property.is(Kind::kString)) {
      return OG_ERROR("Cannot access property with non-string: got ", kind_name(property.kind()));
    }
    if (const Value* stored = object.as_object().find(property.as_string())) return *stored;
    return object.is_object() ? builtin_member(object, property.as_string()) : Value();
  }
  if (object.is_array() || object.is(Kind::kString)) {
    if (property.is(Kind::kInt)) {
      double index = std::isnan(property.as_number()) ? 0 : std::trunc(property.as_number());
      if (object.is(Kind::kString)) {
        std::string character;
        return utf16_at(object.as_string(), index, &character) ? Value::string(character) : Value();
      }
      const double length = static_cast<double>(object.as_array().size());
      if (index < 0) index += length;
      return index >= 0 && index < length ? object.as_array()[static_cast<size_t>(index)] : Value();
    }
    if (property.is(Kind::kString)) return builtin_member(object, property.as_string());
    return OG_ERROR("Cannot access property with non-string/non-number: got ", kind_name(property.kind()));
  }
  if (!property.is(Kind::kString)) {
    return OG_ERROR("Cannot access property with non-string: got ", kind_name(property.kind()));
  }
  return builtin_member(object, property.as_string());
}

Result<Value> Interpreter::eval_slice(const Value& object, const Node& slice, const EnvPtr& env) {
  if (!object.is_array() && !object.is(Kind::kString)) return OG_ERROR("Slice object must be an array or string");
  Value parts[3];
  const Node* nodes[3] = {slice.a.get(), slice.b.get(), slice.c.get()};
  static constexpr const char* kNames[3] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    if (nodes[i] != nullptr) {
      OG_ASSIGN_OR_RETURN(parts[i], eval(*nodes[i], env));
    }
    if (!parts[i].is(Kind::kInt) && !parts[i].is(Kind::kUndefined)) {
      return OG_ERROR("Slice ", kNames[i], " must be numeric or undefined");
    }
  }
  if (object.is_array()) return Value::array(slice_items(object.as_array(), parts[0], parts[1], parts[2]));
  std::string out;
  for (std::string_view piece : slice_items(split_code_points(object.as_string()), parts[0], parts[1], parts[2])) {
    out += piece;
  }
  return Value::string(std::move(out));
}

Result<Interpreter::Arguments> Interpreter::eval_arguments(const std::vector<NodePtr>& args, const EnvPtr& env) {
  Arguments out;
  for (const NodePtr& argument : args) {
    if (argument->kind == NodeKind::kSpread) {
      OG_ASSIGN_OR_RETURN(Value spread, eval(*argument->a, env));
      if (!spread.is_array()) return OG_ERROR("Cannot unpack non-iterable type: ", kind_name(spread.kind()));
      for (const Value& item : spread.as_array()) out.positional.push_back(item);
    } else if (argument->kind != NodeKind::kKeywordArgument && argument->kind != NodeKind::kKeywordSpread) {
      OG_ASSIGN_OR_RETURN(Value value, eval(*argument, env));
      out.positional.push_back(std::move(value));
    }
  }
  const auto add_keyword = [&](const std::string& key, Value value) -> Status {
    if (out.keyword.find(key)) return OG_ERROR("Got multiple values for keyword argument '", key, "'");
    out.keyword.set(key, std::move(value));
    return Status::ok();
  };
  for (const NodePtr& argument : args) {
    if (argument->kind == NodeKind::kKeywordArgument) {
      OG_ASSIGN_OR_RETURN(Value value, eval(*argument->a, env));
      OG_RETURN_IF_ERROR(add_keyword(argument->text, std::move(value)));
    } else if (argument->kind == NodeKind::kKeywordSpread) {
      OG_ASSIGN_OR_RETURN(Value spread, eval(*argument->a, env));
      if (!spread.is_object()) return OG_ERROR("Argument after ** must be a mapping, not ", kind_name(spread.kind()));
      for (const auto& [key, value] : spread.as_object().entries()) OG_RETURN_IF_ERROR(add_keyword(key, value));
    }
  }
  return out;
}

Result<Value> Interpreter::call(const Value& callee, std::vector<Value>& args, const EnvPtr& scope) {
  if (!callee.is(Kind::kFunction)) {
    return OG_ERROR("Cannot call something that is not a function: got ", kind_name(callee.kind()));
  }
  return callee.as_function()(*this, args, scope);
}

Result<Value> Interpreter::eval_call(const Node& node, const EnvPtr& env) {
  OG_ASSIGN_OR_RETURN(Arguments args, eval_arguments(node.list, env));
  if (args.keyword.size() > 0) args.positional.push_back(Value::object(std::move(args.keyword), Kind::kKwargs));
  OG_ASSIGN_OR_RETURN(Value callee, eval(*node.a, env));
  return call(callee, args.positional, env);
}

Result<Value> Interpreter::eval_test(const Node& node, const EnvPtr& env) {
  OG_ASSIGN_OR_RETURN(Value operand, eval(*node.a, env));
  OG_ASSIGN_OR_RETURN(bool result, run_test(node.text, operand, nullptr));
  return Value::boolean(node.negate ? !result : result);
}

Result<Value> Interpreter::eval_set(const Node& node, const EnvPtr& env) {
  Value rhs;
  if (node.b) {
    OG_ASSIGN_OR_RETURN(rhs, eval(*node.b, env));
  } else {
    OG_ASSIGN_OR_RETURN(rhs, eval_block(node.body, env));
  }
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) {
    env->set(target.text, std::move(rhs));
  } else if (target.kind == NodeKind::kTupleLiteral) {
    if (!rhs.is_array()) return OG_ERROR("Cannot unpack non-iterable type in set: ", kind_name(rhs.kind()));
    const Array& items = rhs.as_array();
    if (items.size() != target.list.size()) {
      return OG_ERROR("Too ", target.list.size() > items.size() ? "few" : "many", " items to unpack in set");
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (target.list[i]->kind != NodeKind::kIdentifier) return OG_ERROR("Cannot unpack to non-identifier in set");
      env->set(target.list[i]->text, items[i]);
    }
  } else if (target.kind == NodeKind::kMember) {
    OG_ASSIGN_OR_RETURN(Value object, eval(*target.a, env));
    if (!object.is(Kind::kNamespace)) return OG_ERROR("cannot assign attribute on non-namespace object");
    if (target.b->kind != NodeKind::kIdentifier) return OG_ERROR("Cannot assign to member with non-identifier property");
    object.mutable_object().set(target.b->text, std::move(rhs));
  } else {
    return OG_ERROR("Invalid LHS inside assignment expression");
  }
  return Value::null();
}

Result<Value> Interpreter::eval_for(const Node& node, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* filter = nullptr;
  Value iterable;
  if (node.b->kind == NodeKind::kSelect) {
    OG_ASSIGN_OR_RETURN(iterable, eval(*node.b->a, scope));
    filter = node.b->b.get();
  } else {
    OG_ASSIGN_OR_RETURN(iterable, eval(*node.b, scope));
  }
  if (!iterable.is_array() && !iterable.is_object()) {
    return OG_ERROR("Expected iterable or object type in for loop: got ", kind_name(iterable.kind()));
  }
  if (iterable.is_object()) {  // an object iterates over its keys
    Array keys;
    for (const auto& entry : iterable.as_object().entries()) keys.push_back(Value::string(entry.first));
    iterable = Value::array(std::move(keys));
  }
  const Node& target = *node.a;
  const auto assign = [&](const EnvPtr& into, const Value& current) -> Status {
    if (target.kind == NodeKind::kIdentifier) {
      into->set(target.text, current);
      return Status::ok();
    }
    for (size_t j = 0; j < target.list.size(); ++j) {
      if (target.list[j]->kind != NodeKind::kIdentifier) return OG_ERROR("Cannot unpack non-identifier type");
      into->set(target.list[j]->text, current.as_array()[j]);
    }
    return Status::ok();
  };
  Array items;
  for (const Value& current : iterable.as_array()) {
    if (target.kind == NodeKind::kTupleLiteral) {
      if (!current.is(Kind::kArray)) return OG_ERROR("Cannot unpack non-iterable type: ", kind_name(current.kind()));
      if (current.as_array().size() != target.list.size()) {
        return OG_ERROR("Too ", target.list.size() > current.as_array().size() ? "few" : "many", " items to unpack");
      }
    }
    if (filter != nullptr) {
      auto loop_scope = std::make_shared<Env>(scope);
      OG_RETURN_IF_ERROR(assign(loop_scope, current));
      OG_ASSIGN_OR_RETURN(Value keep, eval(*filter, loop_scope));
      if (!truthy(keep)) continue;
    }
    items.push_back(current);
  }
  std::string out;
  bool no_iteration = true;
  const double count = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    OG_RETURN_IF_ERROR(charge_step());  // an iteration costs a step even when its body is empty
    const double index = static_cast<double>(i);
    Object loop;
    loop.append_new("index", Value::integer(index + 1));
    loop.append_new("index0", Value::integer(index));
    loop.append_new("revindex", Value::integer(count - index));
    loop.append_new("revindex0", Value::integer(count - index - 1));
    loop.append_new("first", Value::boolean(i == 0));
    loop.append_new("last", Value::boolean(i + 1 == items.size()));
    loop.append_new("length", Value::integer(count));
    loop.append_new("previtem", i > 0 ? items[i - 1] : Value());
    loop.append_new("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
    loop.append_new("cycle", loop_cycle(i));
    scope->set("loop", Value::object(std::move(loop)));
    OG_RETURN_IF_ERROR(assign(scope, items[i]));
    Result<Value> body = eval_block(node.body, scope);
    if (!body.is_ok()) {
      if (pending_flow_ == Flow::kNone) return body.status();
      const Flow flow = pending_flow_;
      pending_flow_ = Flow::kNone;
      error_located_ = false;
      if (flow == Flow::kContinue) continue;
      break;
    }
    out += body->as_string();
    OG_RETURN_IF_ERROR(check_bytes(out.size()));
    no_iteration = false;  // as in the reference, an iteration cut short by break/continue does not count
  }
  if (no_iteration) {
    OG_ASSIGN_OR_RETURN(Value otherwise, eval_block(node.alternate, scope));
    out += otherwise.as_string();
  }
  return Value::string(std::move(out));
}

Status Interpreter::bind_macro_arguments(const std::string& display_name, const std::vector<NodePtr>& parameters,
                                         bool uses_kwargs, bool uses_varargs, std::vector<Value> args,
                                         const EnvPtr& scope) {
  Object keyword;
  if (!args.empty() && args.back().is(Kind::kKwargs)) {
    keyword = args.back().as_object();
    args.pop_back();
  }
  std::vector<const Node*> pending_defaults;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Node& parameter = *parameters[i];
    const bool has_value = i < args.size();
    Value value = has_value ? args[i] : Value();
    bool bound = has_value;
    if (!bound) {
      if (const Value* by_name = keyword.find(parameter.text)) {
        value = *by_name;
        keyword.erase(parameter.text);
        bound = true;
      }
    }
    if (!bound && parameter.kind == NodeKind::kKeywordArgument) pending_defaults.push_back(&parameter);
    scope->set(parameter.text, std::move(value));
  }
  if (uses_kwargs) {
    scope->set("kwargs", Value::object(keyword));
  } else if (keyword.size() > 0) {
    return OG_ERROR("macro ", display_name, " takes no keyword argument '", keyword.entries().front().first, "'");
  }
  if (uses_varargs) {
    Array rest;
    for (size_t i = parameters.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->set("varargs", Value::array(std::move(rest)));
  } else if (args.size() > parameters.size()) {
    return OG_ERROR("macro ", display_name, " takes not more than ", parameters.size(), " argument(s)");
  }
  for (const Node* parameter : pending_defaults) {
    OG_ASSIGN_OR_RETURN(Value value, eval(*parameter->a, scope));
    scope->set(parameter->text, std::move(value));
  }
  return Status::ok();
}

Result<Value> Interpreter::eval_macro(const Node& node, const EnvPtr& env) {
  SpecialArgumentScan scan;
  scan.declare_parameters(node.list);
  scan.visit_all(node.body);
  const bool uses_kwargs = scan.accessed.count("kwargs") > 0, uses_varargs = scan.accessed.count("varargs") > 0;
  const Node* macro = &node;
  env->set(node.text, Value::function([macro, uses_kwargs, uses_varargs](Interpreter& self, std::vector<Value>& args,
                                                                        const EnvPtr& scope) -> Result<Value> {
    auto macro_scope = std::make_shared<Env>(scope);
    OG_RETURN_IF_ERROR(self.bind_macro_arguments("'" + macro->text + "'", macro->list, uses_kwargs, uses_varargs,
                                                 args, macro_scope));
    return self.eval_block(macro->body, macro_scope);
  }));
  return Value::null();
}

Result<Value> Interpreter::eval_call_statement(const Node& node, const EnvPtr& env) {
  SpecialArgumentScan scan;
  scan.declare_parameters(node.list);
  scan.visit_all(node.body);
  const bool uses_kwargs = scan.accessed.count("kwargs") > 0, uses_varargs = scan.accessed.count("varargs") > 0;
  const Node* statement = &node;
  Value caller = Value::function([statement, env, uses_kwargs, uses_varargs](Interpreter& self, std::vector<Value>& args,
                                                                           const EnvPtr&) -> Result<Value> {
    auto block_scope = std::make_shared<Env>(env);
    OG_RETURN_IF_ERROR(
        self.bind_macro_arguments("None", statement->list, uses_kwargs, uses_varargs, args, block_scope));
    return self.eval_block(statement->body, block_scope);
  });
  const Node& call_node = *node.a;
  OG_ASSIGN_OR_RETURN(Arguments args, eval_arguments(call_node.list, env));
  args.positional.push_back(Value::object(std::move(args.keyword), Kind::kKwargs));
  OG_ASSIGN_OR_RETURN(Value callee, eval(*call_node.a, env));
  auto call_scope = std::make_shared<Env>(env);
  call_scope->set("caller", std::move(caller));
  return call(callee, args.positional, call_scope);
}

}  // namespace onnx_genai::chat_template
