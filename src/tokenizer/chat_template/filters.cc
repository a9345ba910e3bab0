// `value | filter` and `value | filter(args)`, as @huggingface/jinja's applyFilter dispatches them:
// first by the filter's form (bare name or call), then by the operand's type. Beyond the reference,
// select/reject, round, the bare `default` and the aliases `d` and `count` follow Python Jinja2;
// other filters the reference lacks (batch, ...) are errors here too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/sort.h"
#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

namespace {

using Arguments = Interpreter::Arguments;

// args[index], else the keyword argument `name`, else `fallback` (the reference's `a ?? b ?? c`).
Value argument_or(const Arguments& args, size_t index, const char* name, Value fallback) {
  if (index < args.positional.size()) return args.positional[index];
  const Value* named = args.keyword.find(name);
  return named ? *named : fallback;
}

std::string indent_lines(const std::string& text, int width, bool first, bool blank) {
  std::string out;
  const std::string indent(static_cast<size_t>(std::max(width, 0)), ' ');
  size_t line_start = 0;
  for (size_t index = 0;; ++index) {
    const size_t end = text.find('\n', line_start);
    const std::string_view line = std::string_view(text).substr(line_start, end == std::string::npos ? std::string::npos : end - line_start);
    if (index > 0) out += '\n';
    if ((first || index > 0) && (blank || !line.empty())) out += indent;
    out += line;
    if (end == std::string::npos) break;
    line_start = end + 1;
  }
  return out;
}

// getAttributeValue: "a.b.0" walks objects by key and arrays by index.
Value attribute_path(const Value& item, const std::string& path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (value.is_attribute_container()) {
      const Value* found = value.as_object().find(part);
      value = found ? *found : Value();
    } else if (value.is_array()) {
      const double index = js_parse_int(part);
      if (std::isnan(index) || index < 0 || index >= static_cast<double>(value.as_array().size())) return Value();
      value = value.as_array()[static_cast<size_t>(index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return value;
    start = dot + 1;
  }
}

Result<Value> join_values(const Interpreter& interpreter, const Array& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    if (items[i].is_nullish()) continue;  // Array.prototype.join prints null/undefined as ""
    OG_ASSIGN_OR_RETURN(std::string text, to_js_string(items[i]));
    out += text;
    OG_RETURN_IF_ERROR(interpreter.check_bytes(out.size()));
  }
  return Value::string(std::move(out));
}

// `count` is Jinja2's other name for `length`.
bool is_length_filter(const std::string& name) { return name == "length" || name == "count"; }

Result<Value> default_filter(const Value& operand, const Arguments& args) {
  const Value fallback = args.positional.empty() ? Value::string("") : args.positional[0];
  const Value boolean = argument_or(args, 1, "boolean", Value::boolean(false));
  if (!boolean.is(Kind::kBool)) return OG_ERROR("`default` filter flag must be a boolean");
  if (operand.is(Kind::kUndefined) || (boolean.as_bool() && !truthy(operand))) return fallback;
  return operand;
}

// Jinja2 select/reject: keep the items for which `item is test(arg)` holds (select) or fails
// (reject); with no test, the items' truthiness. Iterates like a for loop (objects by key), and
// strings by character as Python does.
Result<Value> select_filter(const Value& operand, const std::string& name, const Arguments& args) {
  Array items;
  if (operand.is_array()) {
    items = operand.as_array();
  } else if (operand.is_object()) {
    for (const auto& entry : operand.as_object().entries()) items.push_back(Value::string(entry.first));
  } else if (operand.is(Kind::kString)) {
    for (std::string_view c : split_code_points(operand.as_string())) items.push_back(Value::string(std::string(c)));
  } else {
    return OG_ERROR("Cannot apply filter \"", name, "\" to type: ", kind_name(operand.kind()));
  }
  if (args.keyword.size() > 0) return OG_ERROR("`", name, "` takes no keyword arguments");
  if (args.positional.size() > 2) return OG_ERROR("`", name, "`: tests take at most one argument");
  if (!args.positional.empty() && !args.positional[0].is(Kind::kString)) return OG_ERROR("`", name, "`: the test name must be a string");
  const std::string* test = args.positional.empty() ? nullptr : &args.positional[0].as_string();
  if (test && !is_known_test(*test)) return OG_ERROR("Unknown test: ", *test);
  const Value* test_argument = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  const bool keep_passing = name == "select";
  Array kept;
  for (const Value& item : items) {
    bool passes = false;
    if (test) {
      OG_ASSIGN_OR_RETURN(passes, run_test(*test, item, test_argument));
    } else {
      passes = truthy(item);
    }
    if (passes == keep_passing) kept.push_back(item);
  }
  return Value::array(std::move(kept));
}

// Python's round(x, digits): correctly rounded, ties to even. printf rounds the exact binary value
// that way; negative digits scale instead (exact for the integers and ties that occur in practice).
double round_half_even(double x, int digits) {
  if (digits >= 0) {
    char text[512];
    std::snprintf(text, sizeof text, "%.*f", std::min(digits, 400), x);
    return std::strtod(text, nullptr);
  }
  const double scale = std::pow(10.0, -std::max(digits, -308));
  return std::nearbyint(x / scale) * scale;
}

// Jinja2 round(precision=0, method='common'): 'common' is Python's round (an int stays an int),
// 'ceil' and 'floor' give math.ceil/floor(x * 10**precision) / 10**precision as a float.
Result<Value> round_filter(const Value& operand, const Arguments& args) {
  if (!operand.is_number() && !operand.is(Kind::kBool)) {
    return OG_ERROR("Cannot apply filter \"round\" to type: ", kind_name(operand.kind()));
  }
  const double x = operand.is(Kind::kBool) ? (operand.as_bool() ? 1 : 0) : operand.as_number();
  const Value precision = argument_or(args, 0, "precision", Value::integer(0));
  if (!precision.is(Kind::kInt)) return OG_ERROR("round: precision must be an integer");
  const Value method = argument_or(args, 1, "method", Value::string("common"));
  const std::string method_name = method.is(Kind::kString) ? method.as_string() : "";
  if (method_name != "common" && method_name != "ceil" && method_name != "floor") {
    return OG_ERROR("round: method must be common, ceil or floor");
  }
  const int digits = static_cast<int>(std::clamp(precision.as_number(), -1000.0, 1000.0));
  if (method_name == "common") {
    if (std::isnan(x) || std::isinf(x)) return Value::floating(x);
    const bool stays_integer = !operand.is(Kind::kFloat);
    if (stays_integer && digits >= 0) return Value::integer(x);
    const double rounded = round_half_even(x, digits);
    if (std::isinf(rounded)) return OG_ERROR("round: rounded value too large to represent");
    return stays_integer ? Value::integer(rounded) : Value::floating(rounded);
  }
  const double scale = std::pow(10.0, digits);
  const double scaled = x * scale;
  if (!std::isfinite(scale) || !std::isfinite(scaled)) return OG_ERROR("round: cannot ", method_name, " ", js_number_to_string(x), " at precision ", digits);
  return Value::floating((method_name == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

// Filters that have Python Jinja2 semantics and dispatch on the filter, not the operand's type.
bool is_jinja2_filter(const std::string& name) {
  return name == "default" || name == "d" || name == "select" || name == "reject" || name == "round";
}

Result<Value> jinja2_filter(const Value& operand, const std::string& name, const Arguments& args) {
  if (name == "default" || name == "d") return default_filter(operand, args);
  if (name == "round") return round_filter(operand, args);
  return select_filter(operand, name, args);
}

Result<Value> array_filter(const Interpreter& interpreter, const Value& operand, const std::string& name) {
  const Array& items = operand.as_array();
  if (name == "list") return operand;
  if (name == "first" || name == "last") {
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (is_length_filter(name)) return Value::integer(static_cast<double>(items.size()));
  if (name == "reverse") return Value::array(Array(items.rbegin(), items.rend()));
  if (name == "sort") {
    Array sorted = items;
    OG_RETURN_IF_ERROR(stable_sort(sorted, [](const Value& a, const Value& b) { return compare_values(a, b, false); }));
    return Value::array(std::move(sorted));
  }
  if (name == "join") return join_values(interpreter, items, "");
  if (name == "string") {
    JsonOptions options;
    options.undefined_as_null = false;
    OG_ASSIGN_OR_RETURN(std::string text, to_json(operand, options));
    return Value::string(std::move(text));
  }
  if (name == "unique") {
    Array unique;
    for (const Value& item : items) {
      bool seen = false;
      for (const Value& kept : unique) seen = seen || strict_equals(kept, item, /*nan_equal=*/true);
      if (!seen) unique.push_back(item);
    }
    return Value::array(std::move(unique));
  }
  return OG_ERROR("Unknown ArrayValue filter: ", name);
}

Result<Value> string_filter(Interpreter& interpreter, const Value& operand, const std::string& name, const EnvPtr& env) {
  const std::string& text = operand.as_string();
  if (is_length_filter(name) || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    Value member = builtin_member(operand, is_length_filter(name) ? "length" : name);
    if (!member.is(Kind::kFunction)) return member;
    std::vector<Value> none;
    return interpreter.call(member, none, env);
  }
  if (name == "trim") return Value::string(std::string(js_trim(text)));
  if (name == "indent") return Value::string(indent_lines(text, 4, false, false));
  if (name == "join" || name == "string") return operand;
  if (name == "int") {
    const double value = js_parse_int(text);
    return Value::integer(std::isnan(value) ? 0 : value);
  }
  if (name == "float") {
    const double value = js_parse_float(text);
    return Value::floating(std::isnan(value) ? 0 : value);
  }
  return OG_ERROR("Unknown StringValue filter: ", name);
}

Result<Value> number_filter(const Value& operand, const std::string& name) {
  const double x = operand.as_number();
  if (name == "abs") return operand.is(Kind::kInt) ? Value::integer(std::fabs(x)) : Value::floating(std::fabs(x));
  if (name == "int") return Value::integer(std::floor(x));
  if (name == "float") return Value::floating(x);
  if (name == "string") {
    OG_ASSIGN_OR_RETURN(std::string text, to_display_string(operand));
    return Value::string(std::move(text));
  }
  return OG_ERROR("Unknown NumericValue filter: ", name);
}

Result<Value> named_filter(Interpreter& interpreter, const Value& operand, const std::string& name, const EnvPtr& env) {
  if (name == "safe") return operand;
  if (is_jinja2_filter(name)) return jinja2_filter(operand, name, Arguments{});
  if (name == "tojson") {
    OG_ASSIGN_OR_RETURN(std::string json, to_json(operand, JsonOptions{}));
    return Value::string(std::move(json));
  }
  if (operand.is_array()) return array_filter(interpreter, operand, name);
  if (operand.is(Kind::kString)) return string_filter(interpreter, operand, name, env);
  if (operand.is_number()) return number_filter(operand, name);
  if (operand.is_object()) {
    if (is_length_filter(name)) return Value::integer(static_cast<double>(operand.as_object().size()));
    Value member = builtin_member(operand, name);
    if (member.is(Kind::kFunction)) {
      std::vector<Value> none;
      return interpreter.call(member, none, env);
    }
    if (!member.is(Kind::kUndefined)) return member;
    return OG_ERROR("Unknown ObjectValue filter: ", name);
  }
  if (operand.is(Kind::kBool)) {
    const bool b = operand.as_bool();
    if (name == "bool") return operand;
    if (name == "int") return Value::integer(b ? 1 : 0);
    if (name == "float") return Value::floating(b ? 1 : 0);
    if (name == "string") return Value::string(b ? "true" : "false");
    return OG_ERROR("Unknown BooleanValue filter: ", name);
  }
  return OG_ERROR("Cannot apply filter \"", name, "\" to type: ", kind_name(operand.kind()));
}

Result<Value> tojson_filter(const Value& operand, const Arguments& args) {
  JsonOptions options;
  const Value* indent = args.keyword.find("indent");
  if (indent && !indent->is(Kind::kInt) && !indent->is(Kind::kNull)) return OG_ERROR("If set, indent must be a number");
  if (indent && indent->is(Kind::kInt)) options.indent = static_cast<int>(std::clamp(indent->as_number(), 0.0, 64.0));
  const Value* ensure_ascii = args.keyword.find("ensure_ascii");
  if (ensure_ascii && !ensure_ascii->is(Kind::kBool)) return OG_ERROR("If set, ensure_ascii must be a boolean");
  options.ensure_ascii = ensure_ascii && ensure_ascii->as_bool();
  const Value* sort_keys = args.keyword.find("sort_keys");
  if (sort_keys && !sort_keys->is(Kind::kBool)) return OG_ERROR("If set, sort_keys must be a boolean");
  options.sort_keys = sort_keys && sort_keys->as_bool();
  const Value* separators = args.keyword.find("separators");
  if (separators && separators->is_array()) {
    const Array& pair = separators->as_array();
    if (pair.size() != 2 || !pair[0].is(Kind::kString) || !pair[1].is(Kind::kString)) {
      return OG_ERROR("separators must be a tuple of two strings");
    }
    options.custom_separators = true;
    options.item_separator = pair[0].as_string();
    options.key_separator = pair[1].as_string();
  } else if (separators && !separators->is(Kind::kNull)) {
    return OG_ERROR("If set, separators must be a tuple of two strings");
  }
  OG_ASSIGN_OR_RETURN(std::string json, to_json(operand, options));
  return Value::string(std::move(json));
}

Result<Value> sort_filter(const Value& operand, const Arguments& args) {
  const Value reverse = argument_or(args, 0, "reverse", Value::boolean(false));
  if (!reverse.is(Kind::kBool)) return OG_ERROR("reverse must be a boolean");
  const Value case_sensitive = argument_or(args, 1, "case_sensitive", Value::boolean(false));
  if (!case_sensitive.is(Kind::kBool)) return OG_ERROR("case_sensitive must be a boolean");
  const Value attribute = argument_or(args, 2, "attribute", Value::null());
  if (!attribute.is(Kind::kString) && !attribute.is(Kind::kInt) && !attribute.is(Kind::kNull)) {
    return OG_ERROR("attribute must be a string, integer, or null");
  }
  const auto key = [&](const Value& item) {
    if (attribute.is(Kind::kNull)) return item;
    return attribute_path(item, attribute.is(Kind::kInt) ? js_number_to_string(attribute.as_number()) : attribute.as_string());
  };
  Array sorted = operand.as_array();
  OG_RETURN_IF_ERROR(stable_sort(sorted, [&](const Value& a, const Value& b) -> Result<int> {
    OG_ASSIGN_OR_RETURN(int order, compare_values(key(a), key(b), case_sensitive.as_bool()));
    return reverse.as_bool() ? -order : order;
  }));
  return Value::array(std::move(sorted));
}

Result<Value> select_attribute(const Value& operand, const Node& filter) {
  const std::string& name = filter.a->text;
  const bool select = name == "selectattr";
  for (const Value& item : operand.as_array()) {
    if (!item.is_attribute_container()) return OG_ERROR("`", name, "` can only be applied to array of objects");
  }
  std::vector<Value> args;
  for (const NodePtr& arg : filter.list) {
    if (arg->kind != NodeKind::kStringLiteral) return OG_ERROR("arguments of `", name, "` must be strings");
    args.push_back(Value::string(arg->text));
  }
  if (args.empty()) return OG_ERROR("`", name, "` needs an attribute name");
  const std::string* test = args.size() > 1 ? &args[1].as_string() : nullptr;
  if (test && !is_known_test(*test)) return OG_ERROR("Unknown test: ", *test);
  Array kept;
  for (const Value& item : operand.as_array()) {
    const Value* attribute = item.as_object().find(args[0].as_string());
    bool result = false;
    if (attribute && test) {
      OG_ASSIGN_OR_RETURN(result, run_test(*test, *attribute, args.size() > 2 ? &args[2] : nullptr));
    } else if (attribute) {
      result = truthy(*attribute);
    }
    if (result == select) kept.push_back(item);
  }
  return Value::array(std::move(kept));
}

Result<Value> map_filter(const Value& operand, const Arguments& args) {
  const Value* attribute = args.keyword.find("attribute");
  if (attribute == nullptr) return OG_ERROR("`map` expressions without `attribute` set are not currently supported.");
  if (!attribute->is(Kind::kString)) return OG_ERROR("attribute must be a string");
  const Value* fallback = args.keyword.find("default");
  Array mapped;
  for (const Value& item : operand.as_array()) {
    if (!item.is_attribute_container()) return OG_ERROR("items in map must be an object");
    Value value = attribute_path(item, attribute->as_string());
    mapped.push_back(value.is(Kind::kUndefined) && fallback ? *fallback : value);
  }
  return Value::array(std::move(mapped));
}

Result<Value> called_filter(Interpreter& interpreter, const Value& operand, const Node& filter, const EnvPtr& env) {
  if (filter.a->kind != NodeKind::kIdentifier) return OG_ERROR("Unknown filter: ", "CallExpression");
  const std::string& name = filter.a->text;
  if ((name == "selectattr" || name == "rejectattr") && operand.is_array()) {
    return select_attribute(operand, filter);
  }
  OG_ASSIGN_OR_RETURN(Arguments args, interpreter.eval_arguments(filter.list, env));
  if (name == "tojson") return tojson_filter(operand, args);
  if (is_jinja2_filter(name)) return jinja2_filter(operand, name, args);
  if (name == "join") {
    const Value separator = argument_or(args, 0, "separator", Value::string(""));
    Array items;
    if (operand.is(Kind::kString)) {
      for (std::string_view c : split_code_points(operand.as_string())) items.push_back(Value::string(std::string(c)));
    } else if (operand.is_array()) {
      items = operand.as_array();
    } else {
      return OG_ERROR("Cannot apply filter \"join\" to type: ", kind_name(operand.kind()));
    }
    if (!separator.is(Kind::kString)) return OG_ERROR("separator must be a string");
    return join_values(interpreter, items, separator.as_string());
  }
  if (name == "int" || name == "float") {
    const bool to_int = name == "int";
    const Value fallback = argument_or(args, 0, "default", to_int ? Value::integer(0) : Value::floating(0));
    if (operand.is(Kind::kString)) {
      const double value = to_int ? js_parse_int(operand.as_string()) : js_parse_float(operand.as_string());
      if (std::isnan(value)) return fallback;
      return to_int ? Value::integer(value) : Value::floating(value);
    }
    if (operand.is_number()) return operand;
    if (operand.is(Kind::kBool)) return to_int ? Value::integer(operand.as_bool()) : Value::floating(operand.as_bool());
    return OG_ERROR("Cannot apply filter \"", name, "\" to type: ", kind_name(operand.kind()));
  }
  if (operand.is_array()) {
    if (name == "sort") return sort_filter(operand, args);
    if (name == "map") return map_filter(operand, args);
    return OG_ERROR("Unknown ArrayValue filter: ", name);
  }
  if (operand.is(Kind::kString)) {
    if (name == "indent") {
      const Value width = argument_or(args, 0, "width", Value::integer(4));
      if (!width.is(Kind::kInt)) return OG_ERROR("width must be a number");
      const Value first = argument_or(args, 1, "first", Value::boolean(false));
      const Value blank = argument_or(args, 2, "blank", Value::boolean(false));
      const double clamped = std::clamp(width.as_number(), 0.0, 1024.0);
      const std::string& text = operand.as_string();
      const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
      OG_RETURN_IF_ERROR(interpreter.check_bytes(text.size() + lines * static_cast<size_t>(clamped)));
      return Value::string(indent_lines(operand.as_string(), static_cast<int>(clamped), js_truthy(first), js_truthy(blank)));
    }
    if (name == "replace") {
      std::vector<Value> replace_args = args.positional;
      replace_args.push_back(Value::object(args.keyword, Kind::kKwargs));
      return string_replace(operand.as_string(), replace_args);
    }
    return OG_ERROR("Unknown StringValue filter: ", name);
  }
  if (operand.is_object()) {
    Value member = builtin_member(operand, name);
    if (!member.is(Kind::kFunction)) return OG_ERROR("Unknown ObjectValue filter: ", name);
    std::vector<Value> call_args = args.positional;
    if (args.keyword.size() > 0) call_args.push_back(Value::object(args.keyword, Kind::kKwargs));
    return interpreter.call(member, call_args, env);
  }
  return OG_ERROR("Cannot apply filter \"", name, "\" to type: ", kind_name(operand.kind()));
}

}  // namespace

Result<Value> apply_filter(Interpreter& interpreter, const Value& operand, const Node& filter, const EnvPtr& env) {
  if (filter.kind == NodeKind::kIdentifier) return named_filter(interpreter, operand, filter.text, env);
  if (filter.kind == NodeKind::kCall) return called_filter(interpreter, operand, filter, env);
  return OG_ERROR("Unknown filter: ", filter.kind == NodeKind::kMember ? "MemberExpression" : "expression");
}

}  // namespace onnx_genai::chat_template
