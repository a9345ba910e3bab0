// The JSON Schema compiler's state, shared by json_schema.cc (keywords that apply to every type:
// $ref, allOf, anyOf, oneOf, enum, const, type) and json_schema_types.cc (the keywords of each
// instance type).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "constraints/json_grammar.h"
#include "constraints/json_schema.h"

namespace onnx_genai::constraints {

// An object schema's members: declared properties (with required ones it names but does not
// declare appended), each as a `"name": value` symbol, and the symbol of any other member.
struct ObjectMembers {
  std::vector<std::string> names;
  std::vector<Symbol> members;
  std::vector<bool> required;
  std::optional<Symbol> other;  // unset: additionalProperties false
  bool unsatisfiable = false;   // a required name no member may carry
};

class SchemaCompiler {
 public:
  // Schemas nested deeper than this are refused (compilation recurses per level).
  static constexpr int kMaxDepth = 128;
  // Objects with at most this many declared properties accept them in any order (one grammar
  // state per subset of the properties present); larger ones take them in schema order.
  static constexpr size_t kMaxAnyOrderProperties = 6;

  SchemaCompiler(const OrderedJson& root, SchemaDraft draft, bool compact) : root_(root), draft_(draft), json_(g_, compact) {}

  Result<Symbol> compile(const OrderedJson& schema, const std::string& pointer, int depth);
  GrammarBuilder& builder() { return g_; }
  JsonGrammar& json() { return json_; }

 private:
  Result<Symbol> compile_object_schema(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<Symbol> compile_ref(const std::string& ref, const std::string& pointer, int depth);
  Result<Symbol> compile_all_of(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<Symbol> compile_any_of(const OrderedJson& schema, const char* keyword, const std::string& pointer, int depth);
  Status check_one_of(const OrderedJson& branches, const OrderedJson& rest, const std::string& pointer) const;
  Result<Symbol> compile_enum(const OrderedJson& schema, const std::string& pointer);
  Result<std::set<std::string>> types_of(const OrderedJson& schema, const std::string& pointer) const;
  Result<const OrderedJson*> resolve(const std::string& ref, const std::string& pointer) const;
  Result<OrderedJson> merge(OrderedJson a, const OrderedJson& b, const std::string& pointer) const;

  // json_schema_types.cc: one instance type with the keywords that apply to it.
  Result<Symbol> compile_type(const std::string& type, const OrderedJson& schema, const std::string& pointer, int depth);
  Result<Symbol> compile_string(const OrderedJson& schema, const std::string& pointer);
  Result<Symbol> compile_integer(const OrderedJson& schema, const std::string& pointer);
  Result<Symbol> compile_number(const OrderedJson& schema, const std::string& pointer);
  Result<Symbol> compile_array(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<Symbol> compile_object(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<ObjectMembers> object_members(const OrderedJson& schema, const std::string& pointer, int depth);
  // A key outside `names`, as a string literal without escapes (so it cannot spell one of them).
  Symbol other_key(const std::vector<std::string>& names);

  const OrderedJson& root_;
  SchemaDraft draft_;
  GrammarBuilder g_;
  JsonGrammar json_;
  std::map<std::string, int32_t> refs_;  // $ref target -> its rule (recursion goes through these)
};

// A pointer as errors show it: the root, "", as "/".
inline std::string shown(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

// Appends a JSON pointer token ("/" + the key with ~ and / escaped).
std::string pointer_child(const std::string& pointer, const std::string& key);

}  // namespace onnx_genai::constraints
