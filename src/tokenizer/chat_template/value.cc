#include "tokenizer/chat_template/value.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/sort.h"
#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

namespace {
// Deepest structure printed as JSON; deeper (or self-containing) values are an error.
constexpr int kMaxJsonDepth = 512;
}  // namespace

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void Object::append_new(std::string key, Value value) { entries_.emplace_back(std::move(key), std::move(value)); }

bool Object::erase(std::string_view key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == key) {
      entries_.erase(it);
      return true;
    }
  }
  return false;
}

Value Value::null() {
  Value v;
  v.kind_ = Kind::kNull;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.boolean_ = b;
  return v;
}
Value Value::integer(double n) {
  Value v;
  v.kind_ = Kind::kInt;
  v.number_ = n;
  return v;
}
Value Value::floating(double n) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.number_ = n;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::array(Array items, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.array_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::object(Object map, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.object_ = std::make_shared<Object>(std::move(map));
  return v;
}
Value Value::function(Callable call) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<const Callable>(std::move(call));
  return v;
}

Value::~Value() {
  if (!(array_ && array_.use_count() == 1) && !(object_ && object_.use_count() == 1)) return;
  std::vector<Value> pending;
  release_children(pending);
  while (!pending.empty()) {
    Value last = std::move(pending.back());
    pending.pop_back();
    last.release_children(pending);
  }
}

void Value::release_children(std::vector<Value>& out) {
  if (array_ && array_.use_count() == 1) {
    for (Value& item : *array_) out.push_back(std::move(item));
    array_->clear();
  }
  if (object_ && object_.use_count() == 1) {
    for (auto& entry : object_->mutable_entries()) out.push_back(std::move(entry.second));
    object_->mutable_entries().clear();
  }
}

const void* Value::identity() const {
  if (array_) return array_.get();
  if (object_) return object_.get();
  return function_.get();
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kUndefined: return "UndefinedValue";
    case Kind::kNull: return "NullValue";
    case Kind::kBool: return "BooleanValue";
    case Kind::kInt: return "IntegerValue";
    case Kind::kFloat: return "FloatValue";
    case Kind::kString: return "StringValue";
    case Kind::kArray: return "ArrayValue";
    case Kind::kTuple: return "TupleValue";
    case Kind::kObject: return "ObjectValue";
    case Kind::kKwargs: return "KeywordArgumentsValue";
    case Kind::kNamespace: return "NamespaceValue";
    case Kind::kFunction: return "FunctionValue";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kArray:
    case Kind::kTuple: return !v.as_array().empty();
    case Kind::kObject:
    case Kind::kKwargs: return v.as_object().size() > 0;
    default: return js_truthy(v);
  }
}

bool js_truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNull: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt:
    case Kind::kFloat: return v.as_number() != 0 && !std::isnan(v.as_number());
    case Kind::kString: return !v.as_string().empty();
    default: return true;
  }
}

namespace {
// FloatValue.toString(): integral values keep one decimal ("1.0"), -0 prints "-0.0".
std::string float_display(double x) {
  if (x == 0 && std::signbit(x)) return "-0.0";
  if (std::isfinite(x) && std::fmod(x, 1.0) == 0 && std::fabs(x) < 1e21) {
    char buffer[400];
    std::snprintf(buffer, sizeof(buffer), "%.1f", x);
    return buffer;
  }
  return js_number_to_string(x);
}
}  // namespace

Result<std::string> to_display_string(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return std::string("undefined");
    case Kind::kNull: return std::string("null");
    case Kind::kFloat: return float_display(v.as_number());
    case Kind::kArray:
    case Kind::kTuple:
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace: {
      JsonOptions options;
      options.undefined_as_null = false;
      return to_json(v, options);
    }
    case Kind::kFunction: return OG_ERROR("cannot convert a function (macro) to a string");
    default: return to_js_string(v);
  }
}

Result<std::string> to_js_string(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return std::string("undefined");
    case Kind::kNull: return std::string("null");
    case Kind::kBool: return std::string(v.as_bool() ? "true" : "false");
    case Kind::kInt:
    case Kind::kFloat: return js_number_to_string(v.as_number());
    case Kind::kString: return v.as_string();
    case Kind::kArray:
    case Kind::kTuple: {  // Array.prototype.toString joins the elements' toString() with ","
      std::string out;
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        OG_ASSIGN_OR_RETURN(std::string item, to_display_string(v.as_array()[i]));
        out += (i ? "," : "") + item;
      }
      return out;
    }
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace: return std::string("[object Map]");
    case Kind::kFunction: return OG_ERROR("cannot convert a function (macro) to a string");
  }
  return std::string();
}

namespace {
enum class JsType { kUndefined, kNull, kBool, kNumber, kString, kObject };
JsType js_type(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return JsType::kUndefined;
    case Kind::kNull: return JsType::kNull;
    case Kind::kBool: return JsType::kBool;
    case Kind::kInt:
    case Kind::kFloat: return JsType::kNumber;
    case Kind::kString: return JsType::kString;
    default: return JsType::kObject;
  }
}

// ToPrimitive for loose equality: arrays become their joined string, maps "[object Map]".
Value to_primitive(const Value& v) {
  if (v.is(Kind::kFunction)) return Value::string("function");
  Result<std::string> text = to_js_string(v);
  return Value::string(text.is_ok() ? *text : std::string());
}

double to_number(const Value& v) {
  if (v.is(Kind::kBool)) return v.as_bool() ? 1 : 0;
  if (v.is(Kind::kString)) return js_string_to_number(v.as_string());
  return v.as_number();
}
}  // namespace

bool loose_equals(const Value& a, const Value& b) {
  const JsType ta = js_type(a), tb = js_type(b);
  const bool a_nullish = ta == JsType::kNull || ta == JsType::kUndefined;
  const bool b_nullish = tb == JsType::kNull || tb == JsType::kUndefined;
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (ta == tb) return strict_equals(a, b);
  if (ta == JsType::kObject) return loose_equals(to_primitive(a), b);
  if (tb == JsType::kObject) return loose_equals(a, to_primitive(b));
  return to_number(a) == to_number(b);  // number/string/boolean mixes compare as numbers
}

bool strict_equals(const Value& a, const Value& b, bool nan_equal) {
  const JsType ta = js_type(a), tb = js_type(b);
  if (ta != tb) return false;
  switch (ta) {
    case JsType::kUndefined:
    case JsType::kNull: return true;
    case JsType::kBool: return a.as_bool() == b.as_bool();
    case JsType::kNumber:
      return a.as_number() == b.as_number() || (nan_equal && std::isnan(a.as_number()) && std::isnan(b.as_number()));
    case JsType::kString: return a.as_string() == b.as_string();
    case JsType::kObject: return a.identity() == b.identity();
  }
  return false;
}

Result<int> compare_values(const Value& a, const Value& b, bool case_sensitive) {
  const auto numeric = [](const Value& v) { return v.is_number() || v.is(Kind::kBool); };
  if (a.is(Kind::kNull) && b.is(Kind::kNull)) return 0;
  if (a.is(Kind::kNull) || b.is(Kind::kNull)) return OG_ERROR("Cannot compare ", kind_name(a.kind()), " with ", kind_name(b.kind()));
  if (a.is(Kind::kUndefined) && b.is(Kind::kUndefined)) return 0;
  if (a.is(Kind::kUndefined) || b.is(Kind::kUndefined)) {
    return OG_ERROR("Cannot compare ", kind_name(a.kind()), " with ", kind_name(b.kind()));
  }
  if (numeric(a) && numeric(b)) {
    const double x = to_number(a), y = to_number(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind() != b.kind()) {
    return OG_ERROR("Cannot compare different types: ", kind_name(a.kind()), " and ", kind_name(b.kind()));
  }
  if (!a.is(Kind::kString)) return OG_ERROR("Cannot compare type: ", kind_name(a.kind()));
  if (case_sensitive) return compare_utf16(a.as_string(), b.as_string());
  return compare_utf16(ascii_lower(a.as_string()), ascii_lower(b.as_string()));
}

Result<std::string> to_json(const Value& v, const JsonOptions& options, int depth) {
  if (depth > kMaxJsonDepth) return OG_ERROR("value nests deeper than ", kMaxJsonDepth, " levels (or contains itself)");
  switch (v.kind()) {
    case Kind::kNull: return std::string("null");
    case Kind::kUndefined: return std::string(options.undefined_as_null ? "null" : "undefined");
    case Kind::kBool: return std::string(v.as_bool() ? "true" : "false");
    case Kind::kInt:
    case Kind::kFloat: return std::isfinite(v.as_number()) ? js_number_to_string(v.as_number()) : std::string("null");
    case Kind::kString: return json_quote(v.as_string(), options.ensure_ascii);
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: break;
    default: return OG_ERROR("Cannot convert to JSON: ", kind_name(v.kind()));
  }
  const std::string item_separator = options.custom_separators ? options.item_separator : options.indent ? "," : ", ";
  const std::string key_separator = options.custom_separators ? options.key_separator : ": ";
  const std::string indent(static_cast<size_t>(options.indent), ' ');
  std::string base_padding = "\n";
  for (int i = 0; i < depth; ++i) base_padding += indent;
  const std::string child_padding = base_padding + indent;
  std::vector<std::string> core;
  if (v.is(Kind::kArray)) {
    for (const Value& item : v.as_array()) {
      OG_ASSIGN_OR_RETURN(std::string text, to_json(item, options, depth + 1));
      core.push_back(std::move(text));
    }
  } else {
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : v.as_object().entries()) entries.push_back(&entry);
    if (options.sort_keys) {
      OG_RETURN_IF_ERROR(stable_sort(entries, [](const auto* x, const auto* y) -> Result<int> {
        return locale_compare(x->first, y->first);
      }));
    }
    for (const auto* entry : entries) {
      OG_ASSIGN_OR_RETURN(std::string text, to_json(entry->second, options, depth + 1));
      std::string item = json_quote(entry->first, options.ensure_ascii) + key_separator + text;
      core.push_back(options.indent ? child_padding + item : item);
    }
  }
  const bool is_array = v.is(Kind::kArray);
  std::string out = is_array ? "[" : "{";
  if (options.indent && !core.empty()) {
    for (size_t i = 0; i < core.size(); ++i) {
      if (is_array) out += (i ? item_separator + child_padding : child_padding) + core[i];
      else out += (i ? item_separator : "") + core[i];
    }
    out += base_padding;
  } else {
    for (size_t i = 0; i < core.size(); ++i) out += (i ? item_separator : "") + core[i];
  }
  return out + (is_array ? "]" : "}");
}

}  // namespace onnx_genai::chat_template
