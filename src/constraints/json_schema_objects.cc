// Objects: properties, required, additionalProperties, dependencies (lists of names) and
// min/maxProperties.
//
// Members may come in any order in JSON Schema. Up to kMaxAnyOrderProperties declared properties,
// the grammar tracks which are present (a state per subset, so none repeats and every required
// one, and every one a present member depends on, comes before "}"); beyond that, declared
// properties come in schema order (optional ones may be skipped). Other keys (when
// additionalProperties allows them) may come anywhere, spelled without escapes so that they can
// never spell a declared name. With min/maxProperties each state also counts the members so far.
#include <algorithm>

#include "constraints/json_schema_compiler.h"
#include "constraints/regular_product.h"

namespace onnx_genai::constraints {
namespace {

using R = GrammarBuilder;

}  // namespace

Result<KeyRules> SchemaCompiler::key_rules(const OrderedJson& schema, const std::string& pointer, int depth) {
  KeyRules keys;
  auto additional = schema.find("additionalProperties");
  if (additional == schema.end() || *additional == true) {
    keys.other_value = json_.any_value();
  } else if (*additional != false) {
    OG_ASSIGN_OR_RETURN(keys.other_value, compile(*additional, pointer + "/additionalProperties", depth + 1));
  }
  if (auto it = schema.find("patternProperties"); it != schema.end()) {
    if (!it->is_object()) return OG_ERROR("json schema: \"patternProperties\" must be an object at ", shown(pointer));
    if (it->size() > kMaxKeyPatterns) {
      return OG_ERROR("json schema: unsupported keyword \"patternProperties\" with more than ", kMaxKeyPatterns, " patterns at ",
                      shown(pointer));
    }
    for (const auto& [pattern, sub] : it->items()) {
      Result<RegexMatcher> matcher = RegexMatcher::compile(pattern, RegexOptions{TextEncoding::kUtf8, /*search=*/true});
      if (!matcher) return matcher.status().with_context("json schema: patternProperties at " + shown(pointer));
      keys.patterns.push_back(pattern);
      keys.pattern_matchers.push_back(std::move(*matcher));
      keys.pattern_schemas.push_back(sub);
    }
  }
  OG_RETURN_IF_ERROR(add_name_terms(schema, pointer, keys));
  return keys;
}

// propertyNames: its pattern and lengths as regexes every key must match; false: no key at all.
Status SchemaCompiler::add_name_terms(const OrderedJson& schema, const std::string& pointer, KeyRules& keys) const {
  auto names = schema.find("propertyNames");
  if (names == schema.end() || *names == true) return Status::ok();
  const std::string at = pointer + "/propertyNames";
  if (*names == false) {
    keys.no_keys = true;
    return Status::ok();
  }
  if (!names->is_object()) return OG_ERROR("json schema: expected an object or a boolean at ", shown(at));
  for (const auto& [key, value] : names->items()) {
    if (key == "type" && value == "string") continue;
    if (key != "pattern" && key != "minLength" && key != "maxLength" && !only_annotations(OrderedJson{{key, value}}, "")) {
      return OG_ERROR("json schema: unsupported keyword \"", key, "\" in propertyNames (only pattern, minLength, maxLength) at ", shown(at));
    }
  }
  if (auto p = names->find("pattern"); p != names->end()) {
    if (!p->is_string()) return OG_ERROR("json schema: \"pattern\" must be a string at ", shown(at));
    keys.name_terms.emplace_back(p->get<std::string>(), RegexOptions{TextEncoding::kUtf8, /*search=*/true});
  }
  OG_ASSIGN_OR_RETURN(const int64_t min, count_keyword(*names, "minLength", at));
  OG_ASSIGN_OR_RETURN(const int64_t max, count_keyword(*names, "maxLength", at));
  if (min >= 0 || max >= 0) {
    RegexOptions any_character;
    any_character.dot_all = true;
    keys.name_terms.emplace_back(length_regex(min, max), any_character);
  }
  for (const auto& [regex, options] : keys.name_terms) {
    Result<RegexMatcher> matcher = RegexMatcher::compile(regex, options);
    if (!matcher) return matcher.status().with_context("json schema: propertyNames at " + shown(pointer));
    keys.name_matchers.push_back(std::move(*matcher));
  }
  return Status::ok();
}

Result<std::optional<Symbol>> SchemaCompiler::member_value(const KeyRules& keys, const std::string& name,
                                                           const OrderedJson* declared, const std::string& pointer,
                                                           int depth) {
  if (keys.no_keys) return std::optional<Symbol>();
  for (const RegexMatcher& term : keys.name_matchers) {
    OG_ASSIGN_OR_RETURN(const bool matches, term.matches(name));
    if (!matches) return std::optional<Symbol>();
  }
  OrderedJson all = OrderedJson::array();
  if (declared != nullptr) all.push_back(*declared);
  for (size_t i = 0; i < keys.patterns.size(); ++i) {
    OG_ASSIGN_OR_RETURN(const bool matches, keys.pattern_matchers[i].matches(name));
    if (matches) all.push_back(keys.pattern_schemas[i]);
  }
  if (all.empty()) return keys.other_value;
  OG_ASSIGN_OR_RETURN(const Symbol value, compile(all.size() == 1 ? all[0] : OrderedJson{{"allOf", all}}, pointer, depth + 1));
  return std::optional<Symbol>(value);
}

Result<ObjectMembers> SchemaCompiler::object_members(const OrderedJson& schema, const std::string& pointer, int depth) {
  ObjectMembers m;
  OG_ASSIGN_OR_RETURN(const KeyRules keys, key_rules(schema, pointer, depth));
  std::vector<std::optional<Symbol>> values;  // unset: the name may not appear
  if (auto it = schema.find("properties"); it != schema.end()) {
    if (!it->is_object()) return OG_ERROR("json schema: \"properties\" must be an object at ", shown(pointer));
    for (const auto& [name, sub] : it->items()) {
      OG_ASSIGN_OR_RETURN(const std::optional<Symbol> s, member_value(keys, name, &sub, pointer_child(pointer + "/properties", name), depth));
      m.names.push_back(name);
      values.push_back(s);
    }
  }
  m.required.assign(m.names.size(), false);
  if (auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array()) return OG_ERROR("json schema: \"required\" must be an array at ", shown(pointer));
    for (const auto& name : *it) {
      if (!name.is_string()) return OG_ERROR("json schema: \"required\" must list strings at ", shown(pointer));
      const auto at = std::find(m.names.begin(), m.names.end(), name.get<std::string>());
      if (at != m.names.end()) {
        m.required[static_cast<size_t>(at - m.names.begin())] = true;
        continue;
      }
      // Required but not declared: a pattern's or an additional property that must be there.
      m.names.push_back(name.get<std::string>());
      OG_ASSIGN_OR_RETURN(const std::optional<Symbol> s, member_value(keys, m.names.back(), nullptr, pointer, depth));
      values.push_back(s);
      m.required.push_back(true);
    }
  }
  OG_RETURN_IF_ERROR(add_dependencies(schema, pointer, depth, keys, m, values));
  for (size_t i = 0; i < m.names.size(); ++i) {
    m.forbidden[i] = m.forbidden[i] || !values[i];
    m.unsatisfiable = m.unsatisfiable || (m.required[i] && m.forbidden[i]);
    const int32_t member = g_.new_rule("member " + m.names[i]);
    if (values[i]) g_.add_alt(member, {json_.string_literal(m.names[i]), json_.ws(), g_.byte(':'), json_.ws(), *values[i]});
    m.members.push_back(R::ref(member));
  }
  OG_ASSIGN_OR_RETURN(m.other, other_members(keys, m.names, pointer, depth));
  return m;
}

Status SchemaCompiler::add_dependencies(const OrderedJson& schema, const std::string& pointer, int depth,
                                        const KeyRules& keys, ObjectMembers& m,
                                        std::vector<std::optional<Symbol>>& values) {
  m.needs.assign(m.names.size(), {});
  m.forbidden.assign(m.names.size(), false);
  // The member carrying `name`, added when undeclared.
  const auto member_of = [&](const std::string& name) -> Result<size_t> {
    const auto at = std::find(m.names.begin(), m.names.end(), name);
    if (at != m.names.end()) return static_cast<size_t>(at - m.names.begin());
    OG_ASSIGN_OR_RETURN(const std::optional<Symbol> s, member_value(keys, name, nullptr, pointer, depth));
    m.names.push_back(name);
    values.push_back(s);
    m.required.push_back(false);
    m.needs.emplace_back();
    m.forbidden.push_back(false);
    return m.names.size() - 1;
  };
  for (const char* key : {"dependencies", "dependentRequired"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_object()) return OG_ERROR("json schema: \"", key, "\" must be an object at ", shown(pointer));
    for (const auto& [name, rule] : it->items()) {
      const std::string at = pointer_child(pointer + "/" + key, name);
      if (rule.is_boolean() && rule.get<bool>()) continue;
      // A schema is exact here only when it just lists required names (or is false).
      const OrderedJson* needed = &rule;
      if (rule.is_object() && only_annotations(rule, "required") && rule.contains("required")) needed = &rule["required"];
      if (!needed->is_array() && !rule.is_boolean()) {
        return OG_ERROR("json schema: unsupported keyword \"", key, "\" with a schema (only lists of names) at ", shown(at));
      }
      OG_ASSIGN_OR_RETURN(const size_t trigger, member_of(name));
      if (rule.is_boolean()) {
        m.forbidden[trigger] = true;
        continue;
      }
      for (const auto& other : *needed) {
        if (!other.is_string()) return OG_ERROR("json schema: \"", key, "\" must list strings at ", shown(at));
        OG_ASSIGN_OR_RETURN(const size_t target, member_of(other.get<std::string>()));
        m.needs[trigger].push_back(target);
      }
    }
  }
  // A member needing one that may never appear is left to the grammar: no state holding it can
  // close the object, and GrammarBuilder::build drops such states as unproductive.
  return Status::ok();
}

Result<std::optional<Symbol>> SchemaCompiler::other_members(const KeyRules& keys, const std::vector<std::string>& names,
                                                            const std::string& pointer, int depth) {
  if (keys.no_keys) return std::optional<Symbol>();
  const auto member = [&](Symbol key, Symbol value) {
    const int32_t rule = g_.new_rule("other member");
    g_.add_alt(rule, {key, json_.ws(), g_.byte(':'), json_.ws(), value});
    return R::ref(rule);
  };
  if (keys.patterns.empty() && keys.name_terms.empty()) {
    if (!keys.other_value) return std::optional<Symbol>();
    return std::optional<Symbol>(member(other_key(names), *keys.other_value));
  }
  // Keys by the set of patterns they match (none: additional keys), each the product of those
  // patterns, the others negated, the declared names negated and propertyNames' terms.
  // Keys are spelled inside a JSON string, the base term taking any such text.
  const auto json_key = [](RegexOptions options) {
    options.encoding = TextEncoding::kJsonString;
    return options;
  };
  RegexOptions any_character;
  any_character.dot_all = true;
  std::string declared;
  for (const std::string& name : names) declared += (declared.empty() ? "" : "|") + regex_literal(name);
  const int32_t others = g_.new_rule("other members " + pointer);
  bool any = false;
  const size_t n = keys.patterns.size();
  for (size_t set = 0; set < (size_t{1} << n); ++set) {
    if (set == 0 && !keys.other_value) continue;
    RegularProduct key;
    Status added = key.add(".*", json_key(any_character));
    for (size_t i = 0; i < n && added.is_ok(); ++i) {
      added = key.add(keys.patterns[i], json_key(RegexOptions{TextEncoding::kJsonString, /*search=*/true}), !(set & (size_t{1} << i)));
    }
    if (!names.empty() && added.is_ok()) added = key.add("(" + declared + ")", json_key(any_character), /*negated=*/true);
    for (size_t k = 0; k < keys.name_terms.size() && added.is_ok(); ++k) {
      added = key.add(keys.name_terms[k].first, json_key(keys.name_terms[k].second));
    }
    bool empty = false;
    Result<int32_t> body = added.is_ok() ? key.build(g_, "key", &empty) : Result<int32_t>(added);
    if (!body) return body.status().with_context("json schema: patternProperties / propertyNames at " + shown(pointer));
    if (empty) continue;
    std::optional<Symbol> value = keys.other_value;
    if (set != 0) {
      OrderedJson all = OrderedJson::array();
      for (size_t i = 0; i < n; ++i) {
        if (set & (size_t{1} << i)) all.push_back(keys.pattern_schemas[i]);
      }
      OG_ASSIGN_OR_RETURN(value, compile(all.size() == 1 ? all[0] : OrderedJson{{"allOf", all}}, pointer + "/patternProperties", depth + 1));
    }
    const int32_t quoted = g_.new_rule("key");
    g_.add_alt(quoted, {g_.byte('"'), R::ref(*body), g_.byte('"')});
    g_.add_alt(others, {member(R::ref(quoted), *value)});
    any = true;
  }
  if (!any) return std::optional<Symbol>();
  return std::optional<Symbol>(R::ref(others));
}

Result<Symbol> SchemaCompiler::compile_object(const OrderedJson& schema, const std::string& pointer, int depth) {
  OG_ASSIGN_OR_RETURN(const ObjectMembers m, object_members(schema, pointer, depth));
  if (m.unsatisfiable) return R::ref(g_.nothing("unsatisfiable required"));
  OG_ASSIGN_OR_RETURN(int64_t min_count, count_keyword(schema, "minProperties", pointer));
  OG_ASSIGN_OR_RETURN(const int64_t max_count, count_keyword(schema, "maxProperties", pointer));
  min_count = std::max<int64_t>(min_count, 0);
  const size_t k = m.names.size();
  const bool any_order = k <= kMaxAnyOrderProperties;
  const bool has_needs = std::any_of(m.needs.begin(), m.needs.end(), [](const auto& n) { return !n.empty(); });
  if (has_needs && !any_order) {
    return OG_ERROR("json schema: unsupported keyword \"dependencies\" in an object of more than ", kMaxAnyOrderProperties,
                    " properties at ", shown(pointer));
  }
  // Base states: any order, the members present as a bit set; in schema order, the declared
  // members before i done or skipped. Counts go up to the bound that tells them apart.
  const size_t bases = any_order ? size_t{1} << k : k + 1;
  const auto counts = static_cast<size_t>(max_count >= 0 ? max_count : min_count) + 1;
  if (bases * counts > kMaxObjectStates) {
    return OG_ERROR("json schema: unsupported keyword \"minProperties\"/\"maxProperties\" (more than ", kMaxObjectStates,
                    " object states) at ", shown(pointer));
  }
  size_t needed = 0;
  for (size_t i = 0; i < k && any_order; ++i) needed |= m.required[i] ? size_t{1} << i : 0;
  const auto may_close = [&](size_t base) {
    if (!any_order) return std::none_of(m.required.begin() + static_cast<std::ptrdiff_t>(base), m.required.end(), [](bool r) { return r; });
    if ((base & needed) != needed) return false;
    for (size_t i = 0; i < k; ++i) {
      if (!(base & (size_t{1} << i))) continue;
      for (const size_t n : m.needs[i]) {
        if (!(base & (size_t{1} << n))) return false;
      }
    }
    return true;
  };
  std::vector<int32_t> states(bases * counts);
  for (int32_t& s : states) s = g_.new_rule("object " + pointer);
  const auto state = [&](size_t base, size_t count) { return R::ref(states[base * counts + count]); };
  const Symbol comma = g_.byte(','), close = g_.byte('}');
  // The alternatives of `rule` at (base, count): "}" when allowed, then each member that may
  // come next, then another key; each but the object's first member after a comma.
  const auto add_state = [&](int32_t rule, size_t base, size_t count, bool lead) {
    if (may_close(base) && static_cast<int64_t>(count) >= min_count) g_.add_alt(rule, {close});
    if (max_count >= 0 && static_cast<int64_t>(count) >= max_count) return;
    const size_t next_count = std::min(count + 1, counts - 1);
    const auto step = [&](Symbol member, size_t next_base) {
      std::vector<Symbol> seq;
      if (lead) seq = {comma, json_.ws()};
      seq.insert(seq.end(), {member, json_.ws(), state(next_base, next_count)});
      g_.add_alt(rule, std::move(seq));
    };
    for (size_t i = any_order ? 0 : base; i < k; ++i) {
      const size_t bit = size_t{1} << i;
      if (any_order && (base & bit)) continue;
      if (!m.forbidden[i]) step(m.members[i], any_order ? base | bit : i + 1);
      if (!any_order && m.required[i]) break;  // a required member cannot be skipped
    }
    if (m.other) step(*m.other, base);
  };
  for (size_t base = 0; base < bases; ++base) {
    for (size_t count = 0; count < counts; ++count) add_state(states[base * counts + count], base, count, true);
  }
  const int32_t first = g_.new_rule("object start " + pointer);
  add_state(first, 0, 0, false);
  const int32_t object = g_.new_rule("object " + pointer);
  g_.add_alt(object, {g_.byte('{'), json_.ws(), R::ref(first)});
  return R::ref(object);
}

}  // namespace onnx_genai::constraints
