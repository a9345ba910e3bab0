// The JSON Schema compiler's state, shared by json_schema.cc (keywords that apply to every type:
// $ref, allOf, anyOf, oneOf, enum, const, type) and json_schema_types.cc (the keywords of each
// instance type).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "constraints/json_grammar.h"
#include "constraints/json_schema.h"
#include "constraints/regex_compiler.h"
#include "constraints/regular_product.h"

namespace onnx_genai::constraints {

// An object schema's members: declared properties (with required ones it names but does not
// declare appended), each as a `"name": value` symbol, and the symbol of any other member.
struct ObjectMembers {
  std::vector<std::string> names;
  std::vector<Symbol> members;
  std::vector<bool> required;
  std::optional<Symbol> other;  // unset: additionalProperties false
  bool unsatisfiable = false;   // a required name no member may carry
  // dependencies: per member, the members that must come with it; and those that may not come
  // at all (a false dependency, or one needing a name no member may carry).
  std::vector<std::vector<size_t>> needs;
  std::vector<bool> forbidden;
};

// The instance type "number" less the integers, what {"not": {"type": "integer"}} leaves of it.
inline constexpr const char* kNonInteger = "non-integer";

// What an object schema says of keys beyond their declared schemas: patternProperties (each
// pattern's schema applies to the keys it matches), propertyNames (regexes every key must
// match, or no key at all) and additionalProperties (the value of a key nothing else covers).
struct KeyRules {
  std::vector<std::string> patterns;
  std::vector<OrderedJson> pattern_schemas;
  std::vector<std::pair<std::string, RegexOptions>> name_terms;
  // The same regexes, compiled once, for the declared names' texts.
  std::vector<RegexMatcher> pattern_matchers, name_matchers;
  bool no_keys = false;
  std::optional<Symbol> other_value;  // unset: additionalProperties false
};

class SchemaCompiler {
 public:
  // Schemas nested deeper than this are refused (compilation recurses per level).
  static constexpr int kMaxDepth = 128;
  // Objects with at most this many declared properties accept them in any order (one grammar
  // state per subset of the properties present); larger ones take them in schema order.
  static constexpr size_t kMaxAnyOrderProperties = 6;
  // An object's grammar states (members present times members counted for min/maxProperties).
  static constexpr size_t kMaxObjectStates = size_t{1} << 14;
  // patternProperties' keys are split by the set of patterns they match: 2^n key grammars.
  static constexpr size_t kMaxKeyPatterns = 4;
  // uniqueItems tracks the set of values written: 2^n grammar states for n distinct values.
  static constexpr size_t kMaxUniqueValues = 8;

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
  Result<Symbol> compile_enum(const OrderedJson& schema, const std::string& pointer, int depth);
  // The values an enum/const schema allows: those of its type that its other keywords accept.
  Result<std::vector<OrderedJson>> enum_values(const OrderedJson& schema, const std::string& pointer, int depth) const;
  // Whether a value meets `rest` (a schema's keywords beside enum/const), by its compact text.
  Result<std::function<bool(const OrderedJson&)>> value_filter(const OrderedJson& rest, const std::string& pointer,
                                                               int depth) const;
  // The schema with if/then/else reduced where no complement is needed, or an error.
  Result<OrderedJson> without_conditional(const OrderedJson& schema, const std::string& pointer) const;
  // `types` less what "not" excludes (a "not" of types or a boolean), or an error.
  Status apply_not(const OrderedJson& schema, std::set<std::string>& types, const std::string& pointer) const;
  Result<std::set<std::string>> types_of(const OrderedJson& schema, const std::string& pointer) const;
  Result<const OrderedJson*> resolve(const std::string& ref, const std::string& pointer) const;
  Result<OrderedJson> merge(OrderedJson a, const OrderedJson& b, const std::string& pointer) const;

  // json_schema_types.cc: one instance type with the keywords that apply to it.
  Result<Symbol> compile_type(const std::string& type, const OrderedJson& schema, const std::string& pointer, int depth);
  Result<Symbol> compile_string(const OrderedJson& schema, const std::string& pointer);
  Result<Symbol> compile_integer(const OrderedJson& schema, const std::string& pointer);
  // Numbers (or integers) that are multiples of the schema's multipleOf.
  Result<Symbol> compile_multiple_of(const OrderedJson& schema, const std::string& pointer, bool integers);
  Result<Symbol> compile_number(const OrderedJson& schema, const std::string& pointer);
  Result<Symbol> compile_array(const OrderedJson& schema, const std::string& pointer, int depth);
  // An array with uniqueItems true of min..max items (max < 0: open), or an error where the items
  // are not a small finite set of scalars.
  Result<Symbol> compile_unique_items(const OrderedJson& schema, const std::string& pointer, int depth, int64_t min,
                                      int64_t max);
  Result<Symbol> compile_object(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<ObjectMembers> object_members(const OrderedJson& schema, const std::string& pointer, int depth);
  Result<KeyRules> key_rules(const OrderedJson& schema, const std::string& pointer, int depth);
  Status add_name_terms(const OrderedJson& schema, const std::string& pointer, KeyRules& keys) const;
  // The value of a member named `name`: its declared schema (none when null) with the schemas of
  // the patterns it matches; unset when no member may carry it.
  Result<std::optional<Symbol>> member_value(const KeyRules& keys, const std::string& name, const OrderedJson* declared,
                                             const std::string& pointer, int depth);
  // dependencies / dependentRequired into m.needs and m.forbidden, adding the names they mention
  // as members.
  Status add_dependencies(const OrderedJson& schema, const std::string& pointer, int depth, const KeyRules& keys,
                          ObjectMembers& m, std::vector<std::optional<Symbol>>& values);
  // The members whose keys no declared name spells (patternProperties' and additional ones);
  // unset when there are none.
  Result<std::optional<Symbol>> other_members(const KeyRules& keys, const std::vector<std::string>& names,
                                              const std::string& pointer, int depth);
  // A key outside `names`, as a string literal without escapes (so it cannot spell one of them).
  Symbol other_key(const std::vector<std::string>& names);

  const OrderedJson& root_;
  SchemaDraft draft_;
  GrammarBuilder g_;
  JsonGrammar json_;
  std::map<std::string, int32_t> refs_;  // $ref target -> its rule (recursion goes through these)
};

// Whether `schema` has no keyword but annotations (and `except`).
bool only_annotations(const OrderedJson& schema, std::string_view except);

// A non-negative integer keyword (minLength...), or -1 when absent.
Result<int64_t> count_keyword(const OrderedJson& schema, const char* key, const std::string& pointer);

// A regex matching min..max characters (either bound -1: open); '.' must match every character.
std::string length_regex(int64_t min, int64_t max);

// A pointer as errors show it: the root, "", as "/".
inline std::string shown(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

// Appends a JSON pointer token ("/" + the key with ~ and / escaped).
std::string pointer_child(const std::string& pointer, const std::string& key);

}  // namespace onnx_genai::constraints
