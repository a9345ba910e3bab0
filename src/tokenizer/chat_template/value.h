// Runtime values of the template interpreter, mirroring @huggingface/jinja's RuntimeValue classes
// (IntegerValue, FloatValue, StringValue, ArrayValue, TupleValue, ObjectValue,
// KeywordArgumentsValue, NamespaceValue, FunctionValue, NullValue, UndefinedValue). Arrays and
// objects are shared by reference, as in JavaScript: namespaces are mutated in place and `==`
// compares arrays and objects by identity.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::chat_template {

enum class Kind { kUndefined, kNull, kBool, kInt, kFloat, kString, kArray, kTuple, kObject, kKwargs, kNamespace, kFunction };

class Value;
class Interpreter;
struct Env;

using Array = std::vector<Value>;

// Insertion-ordered map, like the JavaScript Map behind ObjectValue.
class Object {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // keeps an existing key's position
  void append_new(std::string key, Value value);  // `key` must not be present yet
  bool erase(std::string_view key);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  std::vector<std::pair<std::string, Value>>& mutable_entries() { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// A callable: builtins and macros. Keyword arguments arrive as a trailing kKwargs value, as in
// the reference. `scope` is the caller's environment (macros are dynamically scoped there).
using Callable = std::function<Result<Value>(Interpreter&, std::vector<Value>& args, const std::shared_ptr<Env>& scope)>;

class Value {
 public:
  Value() = default;  // undefined
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  // Tears nested arrays and objects down iteratively, so a deeply nested value built by a loop
  // cannot overflow the stack when it is freed.
  ~Value();
  static Value null();
  static Value boolean(bool b);
  static Value integer(double n);
  static Value floating(double n);
  static Value string(std::string s);
  static Value array(Array items, Kind kind = Kind::kArray);
  static Value object(Object map, Kind kind = Kind::kObject);
  static Value function(Callable call);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_array() const { return kind_ == Kind::kArray || kind_ == Kind::kTuple; }
  bool is_object() const { return kind_ == Kind::kObject || kind_ == Kind::kKwargs; }
  // ObjectValue or NamespaceValue: things with attributes (isAttributeContainer).
  bool is_attribute_container() const { return is_object() || kind_ == Kind::kNamespace; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_nullish() const { return kind_ == Kind::kNull || kind_ == Kind::kUndefined; }

  bool as_bool() const { return boolean_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return *string_; }
  const Array& as_array() const { return *array_; }
  const Object& as_object() const { return *object_; }
  Object& mutable_object() const { return *object_; }
  const Callable& as_function() const { return *function_; }
  // Identity of the shared payload (arrays, objects, functions), for JavaScript reference equality.
  const void* identity() const;

 private:
  // Moves the elements of a payload this value alone owns into `out`.
  void release_children(std::vector<Value>& out);

  Kind kind_ = Kind::kUndefined;
  bool boolean_ = false;
  double number_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<Array> array_;  // never modified once built
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Callable> function_;
};

const char* kind_name(Kind kind);  // the reference's type names, for error messages

// __bool__(): Python-like truthiness (empty arrays and objects are false, namespaces true).
bool truthy(const Value& v);
// JavaScript truthiness of the raw `.value` (any array or object is true).
bool js_truthy(const Value& v);
// RuntimeValue.toString(): what `{{ v }}` prints (floats keep ".0", containers print as JSON).
Result<std::string> to_display_string(const Value& v);
// String(v.value): what `~` and `+` concatenate (floats print as JavaScript numbers).
Result<std::string> to_js_string(const Value& v);
// `a.value == b.value` (JavaScript loose equality) and `===` (strict; SameValueZero when
// nan_equal, as a Set uses).
bool loose_equals(const Value& a, const Value& b);
bool strict_equals(const Value& a, const Value& b, bool nan_equal = false);
// compareRuntimeValues: numbers (and booleans) by value, strings optionally case-folded.
Result<int> compare_values(const Value& a, const Value& b, bool case_sensitive);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool custom_separators = false;
  std::string item_separator, key_separator;
  bool undefined_as_null = true;  // false when printing (`{{ [x] }}` shows "undefined")
};
// toJSON(): the reference's JSON writer (Python json.dumps separators).
Result<std::string> to_json(const Value& v, const JsonOptions& options, int depth = 0);

}  // namespace onnx_genai::chat_template
