// Methods of strings and objects, tests (`x is defined`) and the globals a template sees, as
// @huggingface/jinja defines them.
#include <cmath>
#include <ctime>
#include <set>

#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/sort.h"
#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

namespace {

using Args = std::vector<Value>;

// A method that ignores the interpreter and the caller's scope.
Value method(std::function<Result<Value>(Args&)> body) {
  return Value::function([body = std::move(body)](Interpreter&, Args& args, const EnvPtr&) { return body(args); });
}

// Python-style str.title() as the reference does it: /\b\w/g upper-cased, the rest unchanged.
std::string title_case(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_ascii_word(out[i]) && (i == 0 || !is_ascii_word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
      out[i] = static_cast<char>(out[i] - 'a' + 'A');
    }
  }
  return out;
}

Result<Value> affix_test(const std::string& text, Args& args, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  const auto matches = [&](const std::string& affix) {
    if (affix.size() > text.size()) return false;
    return prefix ? text.compare(0, affix.size(), affix) == 0 : text.compare(text.size() - affix.size(), affix.size(), affix) == 0;
  };
  if (args.empty()) return OG_ERROR(name, "() requires at least one argument");
  if (args[0].is(Kind::kString)) return Value::boolean(matches(args[0].as_string()));
  if (!args[0].is_array()) return OG_ERROR(name, "() argument must be a string or tuple of strings");
  for (const Value& item : args[0].as_array()) {
    if (!item.is(Kind::kString)) return OG_ERROR(name, "() tuple elements must be strings");
    if (matches(item.as_string())) return Value::boolean(true);
  }
  return Value::boolean(false);
}

// Python's str.split(sep=None, maxsplit=-1) as the reference implements it.
Result<Value> split(const std::string& text, Args& args) {
  const Value sep = args.size() > 0 ? args[0] : Value::null();
  if (!sep.is(Kind::kString) && !sep.is(Kind::kNull)) return OG_ERROR("sep argument must be a string or null");
  const Value maxsplit_value = args.size() > 1 ? args[1] : Value::integer(-1);
  if (!maxsplit_value.is(Kind::kInt)) return OG_ERROR("maxsplit argument must be a number");
  const double maxsplit = maxsplit_value.as_number();
  std::vector<std::string> parts;
  if (sep.is(Kind::kNull)) {
    const std::string_view rest = js_trim_start(text);
    size_t i = 0;
    while (i < rest.size()) {
      while (size_t n = js_space_length(rest, i)) i += n;
      if (i >= rest.size()) break;
      const size_t start = i;
      while (i < rest.size() && js_space_length(rest, i) == 0) ++i;
      if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
        parts.emplace_back(rest.substr(start));
        break;
      }
      parts.emplace_back(rest.substr(start, i - start));
    }
  } else {
    const std::string& separator = sep.as_string();
    if (separator.empty()) return OG_ERROR("empty separator");
    for (size_t start = 0;;) {
      const size_t found = text.find(separator, start);
      parts.push_back(text.substr(start, found == std::string::npos ? std::string::npos : found - start));
      if (found == std::string::npos) break;
      start = found + separator.size();
    }
    const double count = static_cast<double>(parts.size());
    if (maxsplit != -1 && count > maxsplit) {  // splice(maxsplit) then push the joined tail
      const double from = maxsplit < 0 ? std::max(count + maxsplit, 0.0) : maxsplit;
      const size_t cut = static_cast<size_t>(from);
      std::string tail;
      for (size_t i = cut; i < parts.size(); ++i) {
        if (i > cut) tail += separator;
        tail += parts[i];
      }
      parts.resize(cut);
      parts.push_back(std::move(tail));
    }
  }
  Array out;
  for (std::string& part : parts) out.push_back(Value::string(std::move(part)));
  return Value::array(std::move(out));
}

Value string_member(const Value& self, const std::string& name) {
  const std::string text = self.as_string();
  using Transform = std::string (*)(std::string_view);
  static const std::pair<const char*, Transform> kTransforms[] = {
      {"upper", ascii_upper},
      {"lower", ascii_lower},
      {"strip", [](std::string_view s) { return std::string(js_trim(s)); }},
      {"title", title_case},
      {"capitalize", [](std::string_view s) { return s.empty() ? std::string() : ascii_upper(s.substr(0, 1)) + std::string(s.substr(1)); }},
      {"rstrip", [](std::string_view s) { return std::string(js_trim_end(s)); }},
      {"lstrip", [](std::string_view s) { return std::string(js_trim_start(s)); }},
  };
  for (const auto& [method_name, transform] : kTransforms) {
    if (name == method_name) return method([text, transform](Args&) -> Result<Value> { return Value::string(transform(text)); });
  }
  if (name == "length") return Value::integer(static_cast<double>(utf16_length(text)));
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([text, prefix](Args& args) { return affix_test(text, args, prefix); });
  }
  if (name == "split") return method([text](Args& args) { return split(text, args); });
  if (name == "replace") return method([text](Args& args) { return string_replace(text, args); });
  return Value();
}

Array object_items(const Object& object) {
  Array items;
  for (const auto& [key, value] : object.entries()) items.push_back(Value::array({Value::string(key), value}));
  return items;
}

Result<Value> dictsort(const Object& object, Args& args) {
  Object keyword;
  Args positional;
  for (const Value& arg : args) {
    if (arg.is(Kind::kKwargs)) keyword = arg.as_object();
    else positional.push_back(arg);
  }
  const auto option = [&](size_t index, const char* name, Value fallback) {
    if (index < positional.size()) return positional[index];
    const Value* named = keyword.find(name);
    return named ? *named : fallback;
  };
  const Value case_sensitive = option(0, "case_sensitive", Value::boolean(false));
  if (!case_sensitive.is(Kind::kBool)) return OG_ERROR("case_sensitive must be a boolean");
  const Value by = option(1, "by", Value::string("key"));
  if (!by.is(Kind::kString)) return OG_ERROR("by must be a string");
  if (by.as_string() != "key" && by.as_string() != "value") return OG_ERROR("by must be either 'key' or 'value'");
  const Value reverse = option(2, "reverse", Value::boolean(false));
  if (!reverse.is(Kind::kBool)) return OG_ERROR("reverse must be a boolean");
  Array items = object_items(object);
  const size_t index = by.as_string() == "key" ? 0 : 1;
  OG_RETURN_IF_ERROR(stable_sort(items, [&](const Value& a, const Value& b) -> Result<int> {
    OG_ASSIGN_OR_RETURN(int order, compare_values(a.as_array()[index], b.as_array()[index], case_sensitive.as_bool()));
    return reverse.as_bool() ? -order : order;
  }));
  return Value::array(std::move(items));
}

Value object_member(const Value& self, const std::string& name) {
  if (name == "get") {
    return method([self](Args& args) -> Result<Value> {
      if (args.empty() || !args[0].is(Kind::kString)) {
        return OG_ERROR("Object key must be a string: got ", args.empty() ? "undefined" : kind_name(args[0].kind()));
      }
      if (const Value* found = self.as_object().find(args[0].as_string())) return *found;
      return args.size() > 1 ? args[1] : Value::null();
    });
  }
  if (name == "items") return method([self](Args&) -> Result<Value> { return Value::array(object_items(self.as_object())); });
  if (name == "keys" || name == "values") {
    const bool keys = name == "keys";
    return method([self, keys](Args&) -> Result<Value> {
      Array out;
      for (const auto& [key, value] : self.as_object().entries()) out.push_back(keys ? Value::string(key) : value);
      return Value::array(std::move(out));
    });
  }
  if (name == "dictsort") return method([self](Args& args) { return dictsort(self.as_object(), args); });
  return Value();
}

// namespace(mapping or [[key, value], ...], **kwargs)
Result<Value> make_namespace(Interpreter& interpreter, Args& args) {
  Args positional = args;
  Object keyword;
  if (!positional.empty() && positional.back().is(Kind::kKwargs)) {
    keyword = positional.back().as_object();
    positional.pop_back();
  }
  if (positional.size() > 1) return OG_ERROR("namespace expected at most 1 argument, got ", positional.size());
  Object entries;
  if (positional.size() == 1) {
    const Value& source = positional[0];
    if (source.is_object()) {
      for (const auto& [key, value] : source.as_object().entries()) entries.set(key, value);
    } else if (source.is_array()) {
      for (const Value& pair : source.as_array()) {
        Array items;
        if (pair.is_array()) items = pair.as_array();
        if (pair.is(Kind::kString)) {
          for (std::string_view c : split_code_points(pair.as_string())) items.push_back(Value::string(std::string(c)));
        }
        if (items.size() != 2) return OG_ERROR("namespace expected an object or an iterable of [key, value] pairs");
        if (!items[0].is(Kind::kString)) return OG_ERROR("namespace keys must be strings");
        entries.set(items[0].as_string(), items[1]);
      }
    } else {
      return OG_ERROR("'", kind_name(source.kind()), "' object is not iterable");
    }
  }
  for (const auto& [key, value] : keyword.entries()) entries.set(key, value);
  Value ns = Value::object(std::move(entries), Kind::kNamespace);
  interpreter.track_namespace(ns);
  return ns;
}

Result<Value> range(Interpreter& interpreter, Args& args) {
  std::vector<double> numbers;
  for (const Value& arg : args) {
    if (arg.is(Kind::kUndefined)) break;
    if (!arg.is_number() && !arg.is(Kind::kBool)) return OG_ERROR("range() arguments must be numbers, got ", kind_name(arg.kind()));
    numbers.push_back(arg.is(Kind::kBool) ? (arg.as_bool() ? 1 : 0) : arg.as_number());
  }
  if (numbers.empty()) return OG_ERROR("range expected at least 1 argument");
  double start = 0, stop = numbers[0], step = 1;
  if (numbers.size() > 1) {
    start = numbers[0];
    stop = numbers[1];
  }
  if (numbers.size() > 2) step = numbers[2];
  if (step == 0) return OG_ERROR("range() step must not be zero");
  Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    OG_RETURN_IF_ERROR(interpreter.check_items(out.size() + 1));
    out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
  }
  return Value::array(std::move(out));
}

// strftime_now(format): the reference supports %Y %m %d %b %B %H %M %% (English month names,
// local time) and leaves other directives as they are.
Result<Value> strftime_now(Args& args) {
  if (args.empty() || !args[0].is(Kind::kString)) return OG_ERROR("strftime_now() expects a format string");
  static const char* kMonths[] = {"January", "February", "March", "April", "May", "June", "July",
                                  "August", "September", "October", "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const auto pad2 = [](int n) {
    std::string digits = std::to_string(n);
    if (n < 10) digits.insert(digits.begin(), '0');
    return digits;
  };
  const std::string& format = args[0].as_string();
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    const char directive = i + 1 < format.size() && format[i] == '%' ? format[i + 1] : '\0';
    switch (directive) {
      case 'Y': out += std::to_string(local.tm_year + 1900); break;
      case 'm': out += pad2(local.tm_mon + 1); break;
      case 'd': out += pad2(local.tm_mday); break;
      case 'b': out += std::string(kMonths[local.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[local.tm_mon]; break;
      case 'H': out += pad2(local.tm_hour); break;
      case 'M': out += pad2(local.tm_min); break;
      case '%': out += '%'; break;
      default: out += format[i]; continue;
    }
    ++i;
  }
  return Value::string(std::move(out));
}

}  // namespace

Result<Value> string_replace(const std::string& text, const std::vector<Value>& args) {
  if (args.size() < 2) return OG_ERROR("replace() requires at least two arguments");
  if (!args[0].is(Kind::kString) || !args[1].is(Kind::kString)) return OG_ERROR("replace() arguments must be strings");
  Value count = Value::null();
  if (args.size() > 2) {
    if (args[2].is(Kind::kKwargs)) {
      const Value* named = args[2].as_object().find("count");
      if (named) count = *named;
    } else {
      count = args[2];
    }
  }
  if (!count.is(Kind::kInt) && !count.is(Kind::kNull)) return OG_ERROR("replace() count argument must be a number or null");
  if (count.is(Kind::kInt) && count.as_number() == 0) return Value::string(text);
  double remaining = count.is(Kind::kNull) || count.as_number() < 0 ? INFINITY : count.as_number();
  const std::string& old_value = args[0].as_string();
  const std::string& new_value = args[1].as_string();
  std::string out;
  if (old_value.empty()) {  // matches at every code point boundary, both ends included
    for (std::string_view c : split_code_points(text)) {
      if (remaining-- > 0) out += new_value;
      out += c;
    }
    if (remaining > 0) out += new_value;
    return Value::string(std::move(out));
  }
  size_t start = 0;
  for (size_t found; remaining > 0 && (found = text.find(old_value, start)) != std::string::npos; --remaining) {
    out.append(text, start, found - start);
    out += new_value;
    start = found + old_value.size();
  }
  out.append(text, start, std::string::npos);
  return Value::string(std::move(out));
}

Value builtin_member(const Value& object, const std::string& name) {
  if (object.is(Kind::kString)) return string_member(object, name);
  if (object.is_array()) return name == "length" ? Value::integer(static_cast<double>(object.as_array().size())) : Value();
  if (object.is_object()) return object_member(object, name);
  return Value();
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> kTests = {"boolean", "callable", "odd",     "even",    "false",   "true",
                                               "none",    "string",   "number",  "integer", "iterable", "mapping",
                                               "sequence", "lower",   "upper",   "defined", "undefined", "equalto",
                                               "eq"};
  return kTests.count(name) > 0;
}

Result<bool> run_test(const std::string& name, const Value& operand, const Value* argument) {
  const Kind kind = operand.kind();
  if (name == "boolean") return kind == Kind::kBool;
  if (name == "callable") return kind == Kind::kFunction;
  if (name == "odd" || name == "even") {
    if (kind != Kind::kInt) return OG_ERROR("cannot ", name, " on ", kind_name(kind));
    return (std::fmod(operand.as_number(), 2) != 0) == (name == "odd");
  }
  if (name == "false" || name == "true") return kind == Kind::kBool && operand.as_bool() == (name == "true");
  if (name == "none") return kind == Kind::kNull;
  if (name == "string") return kind == Kind::kString;
  if (name == "number") return operand.is_number();
  if (name == "integer") return kind == Kind::kInt;
  if (name == "iterable") return kind == Kind::kArray || kind == Kind::kString;
  if (name == "mapping") return operand.is_object();
  if (name == "sequence") return operand.is_array() || operand.is_object() || kind == Kind::kString;
  if (name == "lower") return kind == Kind::kString && operand.as_string() == ascii_lower(operand.as_string());
  if (name == "upper") return kind == Kind::kString && operand.as_string() == ascii_upper(operand.as_string());
  if (name == "defined") return kind != Kind::kUndefined;
  if (name == "undefined") return kind == Kind::kUndefined;
  if (name == "equalto" || name == "eq") {
    if (argument == nullptr) return OG_ERROR("test '", name, "' needs a value to compare with");
    return strict_equals(operand, *argument);
  }
  return OG_ERROR("Unknown test: ", name);
}

void install_globals(Env& env) {
  env.set("false", Value::boolean(false));
  env.set("true", Value::boolean(true));
  env.set("none", Value::null());
  env.set("False", Value::boolean(false));
  env.set("True", Value::boolean(true));
  env.set("None", Value::null());
  env.set("namespace", Value::function([](Interpreter& interpreter, Args& args, const EnvPtr&) {
    return make_namespace(interpreter, args);
  }));
  env.set("raise_exception", method([](Args& args) -> Result<Value> {
    std::string message;
    if (!args.empty() && !args[0].is(Kind::kUndefined)) {
      OG_ASSIGN_OR_RETURN(message, to_js_string(args[0]));
    }
    return OG_ERROR(kRaisedPrefix, message);
  }));
  env.set("range", Value::function([](Interpreter& interpreter, Args& args, const EnvPtr&) { return range(interpreter, args); }));
  env.set("strftime_now", method(strftime_now));
}

}  // namespace onnx_genai::chat_template
