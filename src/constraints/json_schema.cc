// Keywords that apply whatever the instance's type: $ref, allOf, anyOf, oneOf, enum, const,
// type. allOf is reduced by merging its branches into one schema where that is exact, and
// refused where it is not; anyOf (and oneOf over branches of distinct types) is alternation.
#include <algorithm>
#include <cmath>
#include <functional>

#include "constraints/automaton.h"
#include "constraints/json_schema_compiler.h"

namespace onnx_genai::constraints {
namespace {

using R = GrammarBuilder;

const std::set<std::string, std::less<>> kAnnotations = {
    "$schema", "$id", "$comment", "title", "description", "default", "examples", "readOnly", "writeOnly",
    "deprecated", "contentMediaType", "contentEncoding", "definitions", "$defs"};
const std::set<std::string, std::less<>> kSupported = {
    "$ref", "allOf", "anyOf", "oneOf", "enum", "const", "type", "properties", "required",
    "additionalProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "not", "if", "then", "else", "dependencies", "dependentRequired", "minProperties", "maxProperties",
    "contains", "patternProperties", "propertyNames"};
const std::set<std::string> kAllTypes = {"null", "boolean", "object", "array", "string", "number"};

bool value_has_type(const OrderedJson& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                     v.get<double>() == std::floor(v.get<double>()));
  }
  return false;
}

std::string type_of(const OrderedJson& v) {
  return v.is_null() ? "null" : v.is_boolean() ? "boolean" : v.is_object() ? "object" : v.is_array() ? "array"
       : v.is_string() ? "string" : "number";
}

// Types normalized for overlap: an integer is a number.
bool types_overlap(const std::set<std::string>& a, const std::set<std::string>& b) {
  const auto widen = [](const std::string& t) { return t == "integer" ? std::string("number") : t; };
  for (const std::string& x : a) {
    for (const std::string& y : b) {
      if (widen(x) == widen(y)) return true;
    }
  }
  return false;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

bool only_annotations(const OrderedJson& schema, std::string_view except) {
  for (const auto& [key, value] : schema.items()) {
    if (key != except && !kAnnotations.count(key)) return false;
  }
  return true;
}

std::string pointer_child(const std::string& pointer, const std::string& key) {
  std::string out = pointer + "/";
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

Result<Symbol> SchemaCompiler::compile(const OrderedJson& schema, const std::string& pointer, int depth) {
  if (depth > kMaxDepth) return OG_ERROR("json schema: nested deeper than ", kMaxDepth, " at ", shown(pointer));
  if (schema.is_boolean()) return schema.get<bool>() ? json_.any_value() : R::ref(g_.nothing("false"));
  if (!schema.is_object()) return OG_ERROR("json schema: expected an object or a boolean at ", shown(pointer));
  for (const auto& [key, value] : schema.items()) {
    if (!kAnnotations.count(key) && !kSupported.count(key)) {
      return OG_ERROR("json schema: unsupported keyword \"", key, "\" at ", shown(pointer));
    }
  }
  if (!pointer.empty() && schema.contains("$id")) {
    return OG_ERROR("json schema: unsupported keyword \"$id\" in a subschema (it changes the base URI) at ", shown(pointer));
  }
  return compile_object_schema(schema, pointer, depth);
}

Result<Symbol> SchemaCompiler::compile_object_schema(const OrderedJson& schema, const std::string& pointer, int depth) {
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!ref->is_string()) return OG_ERROR("json schema: \"$ref\" must be a string at ", shown(pointer));
    // Draft-07 ignores a $ref's siblings; 2020-12 applies them, which would be an intersection.
    if (draft_ == SchemaDraft::k2020_12 && !only_annotations(schema, "$ref")) {
      return OG_ERROR("json schema: unsupported keyword \"$ref\" with sibling keywords at ", shown(pointer));
    }
    return compile_ref(ref->get<std::string>(), pointer, depth);
  }
  if (schema.contains("if") || schema.contains("then") || schema.contains("else")) {
    OG_ASSIGN_OR_RETURN(const OrderedJson plain, without_conditional(schema, pointer));
    return compile(plain, pointer, depth + 1);
  }
  if (schema.contains("allOf")) return compile_all_of(schema, pointer, depth);
  if (schema.contains("anyOf")) return compile_any_of(schema, "anyOf", pointer, depth);
  if (schema.contains("oneOf")) return compile_any_of(schema, "oneOf", pointer, depth);
  if (schema.contains("enum") || schema.contains("const")) return compile_enum(schema, pointer, depth);
  OG_ASSIGN_OR_RETURN(std::set<std::string> types, types_of(schema, pointer));
  if (types.count("number")) types.erase("integer");
  OG_RETURN_IF_ERROR(apply_not(schema, types, pointer));
  const int32_t rule = g_.new_rule("schema " + pointer);
  for (const std::string& type : types) {
    OG_ASSIGN_OR_RETURN(const Symbol s, compile_type(type, schema, pointer, depth));
    g_.add_alt(rule, {s});
  }
  return R::ref(rule);
}

// if/then/else is "(if and then) or (not if and else)": without a complement of the condition
// only its trivial forms reduce. then/else without if, and if without either, change nothing; a
// boolean condition picks its branch, which then applies as allOf.
Result<OrderedJson> SchemaCompiler::without_conditional(const OrderedJson& schema, const std::string& pointer) const {
  OrderedJson rest = schema;
  for (const char* key : {"if", "then", "else"}) rest.erase(key);
  auto condition = schema.find("if");
  if (condition == schema.end() || (!schema.contains("then") && !schema.contains("else"))) return rest;
  if (!condition->is_boolean()) {
    return OG_ERROR("json schema: unsupported keyword \"if\" with \"then\"/\"else\" (only a true or false condition) at ",
                    shown(pointer));
  }
  const char* branch = condition->get<bool>() ? "then" : "else";
  if (!schema.contains(branch)) return rest;
  return OrderedJson{{"allOf", OrderedJson::array({rest, schema[branch]})}};
}

// "not" of a boolean, of {} or of types only: the types it leaves. Not an integer leaves the
// numbers with a non-zero fraction (kNonInteger).
Status SchemaCompiler::apply_not(const OrderedJson& schema, std::set<std::string>& types, const std::string& pointer) const {
  auto negated = schema.find("not");
  if (negated == schema.end()) return Status::ok();
  const std::string at = pointer + "/not";
  std::set<std::string> excluded;
  if (negated->is_boolean()) {
    if (negated->get<bool>()) excluded = kAllTypes;
  } else if (negated->is_object() && only_annotations(*negated, "type")) {
    OG_ASSIGN_OR_RETURN(excluded, types_of(*negated, at));
  } else {
    return OG_ERROR("json schema: unsupported keyword \"not\" (only of types, {} or a boolean) at ", shown(at));
  }
  for (const std::string& t : excluded) {
    if (t == "integer" && types.count("number") && !excluded.count("number")) {
      types.erase("number");
      types.insert(kNonInteger);
    }
    types.erase(t);
    if (t == "number") types.erase("integer");
  }
  return Status::ok();
}

Result<std::set<std::string>> SchemaCompiler::types_of(const OrderedJson& schema, const std::string& pointer) const {
  if (schema.is_boolean()) return schema.get<bool>() ? kAllTypes : std::set<std::string>{};
  auto type = schema.find("type");
  if (type == schema.end()) {
    std::set<std::string> out;
    if (schema.contains("const")) return std::set<std::string>{type_of(schema["const"])};
    if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
      for (const auto& v : *e) out.insert(type_of(v));
      return out;
    }
    return kAllTypes;
  }
  std::set<std::string> out;
  const OrderedJson list = type->is_array() ? *type : OrderedJson::array({*type});
  for (const auto& t : list) {
    const std::string name = t.is_string() ? t.get<std::string>() : "";
    if (!kAllTypes.count(name) && name != "integer") {
      return OG_ERROR("json schema: \"type\" ", t.dump(), " is not a JSON Schema type at ", shown(pointer));
    }
    out.insert(name);
  }
  return out;
}

Result<const OrderedJson*> SchemaCompiler::resolve(const std::string& ref, const std::string& pointer) const {
  if (ref.empty() || ref[0] != '#') {
    return OG_ERROR("json schema: unsupported keyword \"$ref\" to \"", ref, "\" (only refs inside the document, \"#...\") at ", shown(pointer));
  }
  const std::string fragment = percent_decode(ref.substr(1));
  if (!fragment.empty() && fragment[0] != '/') {
    return OG_ERROR("json schema: unsupported keyword \"$ref\" to the anchor \"", ref, "\" at ", shown(pointer));
  }
  const OrderedJson* node = &root_;
  for (size_t at = 0; at < fragment.size();) {
    const size_t end = std::min(fragment.find('/', at + 1), fragment.size());
    std::string token;
    for (size_t k = at + 1; k < end; ++k) {
      if (fragment[k] == '~' && k + 1 < end && (fragment[k + 1] == '0' || fragment[k + 1] == '1')) {
        token += fragment[++k] == '0' ? '~' : '/';
      } else {
        token += fragment[k];
      }
    }
    at = end;
    if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else if (node->is_array() && !token.empty() && token.size() < 10 &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               std::stoul(token) < node->size()) {
      node = &(*node)[std::stoul(token)];
    } else {
      return OG_ERROR("json schema: \"$ref\" \"", ref, "\" does not resolve at ", shown(pointer));
    }
  }
  return node;
}

Result<Symbol> SchemaCompiler::compile_ref(const std::string& ref, const std::string& pointer, int depth) {
  if (auto it = refs_.find(ref); it != refs_.end()) return R::ref(it->second);
  OG_ASSIGN_OR_RETURN(const OrderedJson* target, resolve(ref, pointer));
  const int32_t rule = g_.new_rule("$ref " + ref);
  refs_.emplace(ref, rule);
  OG_ASSIGN_OR_RETURN(const Symbol s, compile(*target, percent_decode(ref.substr(1)), depth + 1));
  g_.add_alt(rule, {s});
  return R::ref(rule);
}

// allOf branches merged into one schema: exact when each keyword appears in one branch, or in
// several with values whose intersection is again one keyword (required, properties, type,
// bounds). Anything else (two patterns, additionalProperties next to another branch's
// properties) is refused as not reducible.
Result<OrderedJson> SchemaCompiler::merge(OrderedJson a, const OrderedJson& b, const std::string& pointer) const {
  const auto declares_outside = [](const OrderedJson& x, const OrderedJson& y) {
    if (!x.contains("properties")) return false;
    for (const auto& [name, v] : x["properties"].items()) {
      if (!y.contains("properties") || !y["properties"].contains(name)) return true;
    }
    return false;
  };
  for (const OrderedJson* side : std::initializer_list<const OrderedJson*>{&a, &b}) {
    const OrderedJson& other = side == &a ? b : a;
    if (side->contains("additionalProperties") && (*side)["additionalProperties"] != true && declares_outside(other, *side)) {
      return OG_ERROR("json schema: unsupported keyword \"allOf\" (additionalProperties next to another branch's properties) at ", shown(pointer));
    }
    if (side->contains("additionalItems") && other.contains("items")) {
      return OG_ERROR("json schema: unsupported keyword \"allOf\" (additionalItems next to another branch's items) at ", shown(pointer));
    }
  }
  for (const auto& [key, vb] : b.items()) {
    if (!a.contains(key) || kAnnotations.count(key)) {
      if (!a.contains(key)) a[key] = vb;
      continue;
    }
    OrderedJson& va = a[key];
    if (va == vb) continue;
    if (key == "required" && va.is_array() && vb.is_array()) {
      for (const auto& name : vb) {
        if (std::find(va.begin(), va.end(), name) == va.end()) va.push_back(name);
      }
    } else if (key == "properties" && va.is_object() && vb.is_object()) {
      for (const auto& [name, sub] : vb.items()) {
        va[name] = va.contains(name) ? OrderedJson{{"allOf", OrderedJson::array({va[name], sub})}} : sub;
      }
    } else if (key == "type") {
      OG_ASSIGN_OR_RETURN(const std::set<std::string> ta, types_of(OrderedJson{{"type", va}}, pointer));
      OG_ASSIGN_OR_RETURN(const std::set<std::string> tb, types_of(OrderedJson{{"type", vb}}, pointer));
      OrderedJson both = OrderedJson::array();
      for (const std::string& t : ta) {
        if (tb.count(t)) both.push_back(t);
        else if ((t == "integer" && tb.count("number")) || (t == "number" && tb.count("integer"))) both.push_back("integer");
      }
      va = both;
    } else if ((key == "minLength" || key == "minItems" || key == "minProperties" || key == "minimum") && va.is_number() && vb.is_number()) {
      va = std::max(va.get<double>(), vb.get<double>()) == va.get<double>() ? va : vb;
    } else if ((key == "maxLength" || key == "maxItems" || key == "maxProperties" || key == "maximum") && va.is_number() && vb.is_number()) {
      va = std::min(va.get<double>(), vb.get<double>()) == va.get<double>() ? va : vb;
    } else {
      return OG_ERROR("json schema: unsupported keyword \"allOf\" (branches disagree on \"", key, "\") at ", shown(pointer));
    }
  }
  return a;
}

Result<Symbol> SchemaCompiler::compile_all_of(const OrderedJson& schema, const std::string& pointer, int depth) {
  const OrderedJson& branches = schema["allOf"];
  if (!branches.is_array() || branches.empty()) return OG_ERROR("json schema: \"allOf\" must be a non-empty array at ", shown(pointer));
  OrderedJson merged = schema;
  merged.erase("allOf");
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = pointer + "/allOf/" + std::to_string(i);
    const OrderedJson* branch = &branches[i];
    // A branch that is a bare $ref is merged as its target (a chain of at most kMaxDepth refs).
    for (int hops = 0; branch->is_object() && branch->contains("$ref") && only_annotations(*branch, "$ref"); ++hops) {
      if (hops > kMaxDepth || !(*branch)["$ref"].is_string()) return OG_ERROR("json schema: \"$ref\" chain too long at ", at);
      OG_ASSIGN_OR_RETURN(branch, resolve((*branch)["$ref"].get<std::string>(), at));
    }
    if (branch->is_boolean()) {
      if (!branch->get<bool>()) return R::ref(g_.nothing("allOf false"));
      continue;
    }
    if (!branch->is_object()) return OG_ERROR("json schema: expected an object or a boolean at ", at);
    // A branch's if/then/else stays within the branch (never meets another branch's then).
    OrderedJson plain;
    if (branch->contains("if") || branch->contains("then") || branch->contains("else")) {
      OG_ASSIGN_OR_RETURN(plain, without_conditional(*branch, at));
      branch = &plain;
    }
    if (branch->contains("$ref")) return OG_ERROR("json schema: unsupported keyword \"$ref\" with siblings inside allOf at ", at);
    OG_ASSIGN_OR_RETURN(merged, merge(std::move(merged), *branch, at));
  }
  return compile(merged, pointer, depth + 1);
}

namespace {

// The values a property schema allows when it is a const or an enum; empty otherwise.
std::vector<OrderedJson> fixed_values(const OrderedJson& schema) {
  if (!schema.is_object()) return {};
  if (schema.contains("const")) return {schema["const"]};
  if (schema.contains("enum") && schema["enum"].is_array()) return std::vector<OrderedJson>(schema["enum"].begin(), schema["enum"].end());
  return {};
}

bool lists_required(const OrderedJson& schema, const std::string& name) {
  if (!schema.is_object() || !schema.contains("required") || !schema["required"].is_array()) return false;
  const OrderedJson& list = schema["required"];
  return std::find(list.begin(), list.end(), name) != list.end();
}

// A property every branch requires with a const/enum value, no value shared by two branches
// (a tagged union): an object matching one branch cannot match another.
bool has_discriminator(const std::vector<const OrderedJson*>& branches, const OrderedJson& rest) {
  const OrderedJson& first = *branches[0];
  if (!first.contains("properties") || !first["properties"].is_object()) return false;
  for (const auto& [name, unused] : first["properties"].items()) {
    std::vector<OrderedJson> seen;
    bool tagged = true;
    for (const OrderedJson* b : branches) {
      const bool present = (lists_required(*b, name) || lists_required(rest, name)) && b->contains("properties") &&
                           (*b)["properties"].is_object() && (*b)["properties"].contains(name);
      const std::vector<OrderedJson> values = present ? fixed_values((*b)["properties"][name]) : std::vector<OrderedJson>{};
      tagged = tagged && !values.empty();
      for (const OrderedJson& v : values) {
        tagged = tagged && std::find(seen.begin(), seen.end(), v) == seen.end();
      }
      seen.insert(seen.end(), values.begin(), values.end());
    }
    if (tagged) return true;
  }
  return false;
}

}  // namespace

// Alternation means "at least one"; it is "exactly one" only when branches cannot overlap:
// branches of distinct types, or objects told apart by a discriminator property.
Status SchemaCompiler::check_one_of(const OrderedJson& branches, const OrderedJson& rest, const std::string& pointer) const {
  std::vector<std::set<std::string>> types;
  std::vector<const OrderedJson*> resolved;
  bool overlap = false, all_objects = true;
  for (const OrderedJson& branch : branches) {
    const OrderedJson* b = &branch;
    if (b->is_object() && b->contains("$ref") && (*b)["$ref"].is_string()) {
      OG_ASSIGN_OR_RETURN(b, resolve((*b)["$ref"].get<std::string>(), pointer));
    }
    OG_ASSIGN_OR_RETURN(std::set<std::string> t, types_of(*b, pointer));
    if (rest.contains("type")) {
      OG_ASSIGN_OR_RETURN(const std::set<std::string> outer, types_of(rest, pointer));
      std::erase_if(t, [&](const std::string& x) { return !types_overlap({x}, outer); });
    }
    for (const auto& seen : types) overlap = overlap || types_overlap(seen, t);
    all_objects = all_objects && b->is_object() && t == std::set<std::string>{"object"};
    types.push_back(std::move(t));
    resolved.push_back(b);
  }
  if (!overlap || (all_objects && has_discriminator(resolved, rest))) return Status::ok();
  return OG_ERROR("json schema: unsupported keyword \"oneOf\" (branches that may overlap; only oneOf over distinct types "
                  "or objects with a const/enum discriminator) at ", shown(pointer));
}

Result<Symbol> SchemaCompiler::compile_any_of(const OrderedJson& schema, const char* keyword, const std::string& pointer,
                                              int depth) {
  const OrderedJson& branches = schema[keyword];
  if (!branches.is_array() || branches.empty()) {
    return OG_ERROR("json schema: \"", keyword, "\" must be a non-empty array at ", shown(pointer));
  }
  OrderedJson rest = schema;
  rest.erase(keyword);
  // oneOf over booleans only: exactly one true branch lets the rest through, any other count
  // nothing (every instance matches all the true ones).
  if (std::string_view(keyword) == "oneOf" && std::all_of(branches.begin(), branches.end(), [](const OrderedJson& b) { return b.is_boolean(); })) {
    if (std::count(branches.begin(), branches.end(), OrderedJson(true)) != 1) return R::ref(g_.nothing("oneOf of booleans"));
    return compile(rest, pointer, depth + 1);
  }
  const bool has_rest = !only_annotations(rest, "");
  std::vector<OrderedJson> effective;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = pointer + "/" + keyword + "/" + std::to_string(i);
    // The parent's other keywords apply to every branch: anyOf(A, B) ∧ P = anyOf(A ∧ P, B ∧ P).
    effective.push_back(has_rest ? OrderedJson{{"allOf", OrderedJson::array({rest, branches[i]})}} : branches[i]);
  }
  if (std::string_view(keyword) == "oneOf") OG_RETURN_IF_ERROR(check_one_of(branches, rest, pointer));
  const int32_t rule = g_.new_rule(std::string(keyword) + " " + pointer);
  for (size_t i = 0; i < effective.size(); ++i) {
    OG_ASSIGN_OR_RETURN(const Symbol s, compile(effective[i], pointer + "/" + keyword + "/" + std::to_string(i), depth + 1));
    g_.add_alt(rule, {s});
  }
  return R::ref(rule);
}

Result<std::function<bool(const OrderedJson&)>> SchemaCompiler::value_filter(const OrderedJson& rest, const std::string& pointer,
                                                                              int depth) const {
  SchemaCompiler other(root_, draft_, /*compact=*/true);
  OG_ASSIGN_OR_RETURN(const Symbol start, other.compile(rest, pointer, depth + 1));
  GrammarBuilder& g = other.builder();
  const int32_t text = g.new_rule("filter");
  g.add_alt(text, {start});
  OG_ASSIGN_OR_RETURN(Grammar grammar, g.build(text));
  auto automaton = std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(grammar)));
  const auto accepts = [automaton](const std::string& text) {
    const Result<bool> accepted = automaton->accepts(text);
    return accepted.is_ok() && *accepted;
  };
  return std::function<bool(const OrderedJson&)>([accepts](const OrderedJson& v) {
    if (accepts(v.dump())) return true;
    // An integral float is also the integer (1.0 is 1 in JSON Schema; integer grammars spell 1).
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15 && accepts(std::to_string(static_cast<int64_t>(d)));
  });
}

Result<std::vector<OrderedJson>> SchemaCompiler::enum_values(const OrderedJson& schema, const std::string& pointer,
                                                              int depth) const {
  // Other keywords beside the values keep those they accept: each value's compact text is run
  // through their own grammar (which may refuse some valid spellings: then the value goes too).
  OrderedJson rest = schema;
  for (const char* key : {"enum", "const", "type"}) rest.erase(key);
  std::function<bool(const OrderedJson&)> kept = [](const OrderedJson&) { return true; };
  if (!only_annotations(rest, "")) {
    Result<std::function<bool(const OrderedJson&)>> filter = value_filter(rest, pointer, depth);
    if (!filter) return filter.status().with_context("next to enum/const at " + shown(pointer));
    kept = std::move(*filter);
  }
  OrderedJson values = OrderedJson::array();
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array()) return OG_ERROR("json schema: \"enum\" must be an array at ", shown(pointer));
    values = schema["enum"];
  }
  if (schema.contains("const")) {
    const OrderedJson& c = schema["const"];
    if (!schema.contains("enum") || std::find(values.begin(), values.end(), c) != values.end()) {
      values = OrderedJson::array({c});
    } else {
      values = OrderedJson::array();
    }
  }
  std::set<std::string> types(kAllTypes.begin(), kAllTypes.end());
  types.insert("integer");
  if (schema.contains("type")) {
    OG_ASSIGN_OR_RETURN(types, types_of(schema, pointer));
  }
  std::vector<OrderedJson> out;
  for (const auto& v : values) {
    const bool allowed = std::any_of(types.begin(), types.end(), [&](const std::string& t) { return value_has_type(v, t); });
    if (allowed && kept(v)) out.push_back(v);
  }
  return out;
}

Result<Symbol> SchemaCompiler::compile_enum(const OrderedJson& schema, const std::string& pointer, int depth) {
  OG_ASSIGN_OR_RETURN(const std::vector<OrderedJson> values, enum_values(schema, pointer, depth));
  const int32_t rule = g_.new_rule("enum " + pointer);
  for (const auto& v : values) g_.add_alt(rule, {json_.value(v)});
  return R::ref(rule);
}

Result<Grammar> compile_json_schema(std::string_view schema_text, const JsonSchemaOptions& options) {
  OrderedJson root = OrderedJson::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return OG_ERROR("json schema: not valid JSON");
  SchemaDraft draft = options.default_draft;
  if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
    const std::string uri = root["$schema"].get<std::string>();
    if (uri.find("draft-07") != std::string::npos) draft = SchemaDraft::kDraft7;
    else if (uri.find("2020-12") != std::string::npos) draft = SchemaDraft::k2020_12;
    else return OG_ERROR("json schema: unsupported \"$schema\" \"", uri, "\" (draft 2020-12 and draft-07 are)");
  }
  SchemaCompiler compiler(root, draft, options.compact);
  OG_ASSIGN_OR_RETURN(const Symbol start, compiler.compile(root, "", 0));
  // No whitespace around the value: a JSON text allows it, but a model should not spend tokens on it.
  GrammarBuilder& g = compiler.builder();
  const int32_t text = g.new_rule("json text");
  g.add_alt(text, {start});
  return g.build(text);
}

Result<Grammar> any_json_object_grammar(bool compact) {
  GrammarBuilder g;
  JsonGrammar json(g, compact);
  const int32_t text = g.new_rule("json object text");
  g.add_alt(text, {json.any_object()});
  return g.build(text);
}

}  // namespace onnx_genai::constraints
