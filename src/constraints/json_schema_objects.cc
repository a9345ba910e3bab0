// Objects: properties, required and additionalProperties.
//
// Members may come in any order in JSON Schema. Up to kMaxAnyOrderProperties declared properties,
// the grammar tracks which are present (a state per subset, so none repeats and every required
// one comes before "}"); beyond that, declared properties come in schema order (optional ones may
// be skipped). Other keys (when additionalProperties allows them) may come anywhere, spelled
// without escapes so that they can never spell a declared name.
#include <algorithm>

#include "constraints/json_schema_compiler.h"

namespace onnx_genai::constraints {
namespace {

using R = GrammarBuilder;

}  // namespace

Result<ObjectMembers> SchemaCompiler::object_members(const OrderedJson& schema, const std::string& pointer, int depth) {
  ObjectMembers m;
  std::vector<Symbol> values;
  if (auto it = schema.find("properties"); it != schema.end()) {
    if (!it->is_object()) return OG_ERROR("json schema: \"properties\" must be an object at ", shown(pointer));
    for (const auto& [name, sub] : it->items()) {
      OG_ASSIGN_OR_RETURN(const Symbol s, compile(sub, pointer_child(pointer + "/properties", name), depth + 1));
      m.names.push_back(name);
      values.push_back(s);
    }
  }
  std::optional<Symbol> other_value;  // unset: additionalProperties false
  auto additional = schema.find("additionalProperties");
  if (additional == schema.end() || *additional == true) {
    other_value = json_.any_value();
  } else if (*additional != false) {
    OG_ASSIGN_OR_RETURN(other_value, compile(*additional, pointer + "/additionalProperties", depth + 1));
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
      // Required but not declared: an additional property that must be there.
      if (!other_value) {
        m.unsatisfiable = true;
        return m;
      }
      m.names.push_back(name.get<std::string>());
      values.push_back(*other_value);
      m.required.push_back(true);
    }
  }
  for (size_t i = 0; i < m.names.size(); ++i) {
    const int32_t member = g_.new_rule("member " + m.names[i]);
    g_.add_alt(member, {json_.string_literal(m.names[i]), json_.ws(), g_.byte(':'), json_.ws(), values[i]});
    m.members.push_back(R::ref(member));
  }
  if (other_value) {
    const int32_t member = g_.new_rule("other member");
    g_.add_alt(member, {other_key(m.names), json_.ws(), g_.byte(':'), json_.ws(), *other_value});
    m.other = R::ref(member);
  }
  return m;
}

Result<Symbol> SchemaCompiler::compile_object(const OrderedJson& schema, const std::string& pointer, int depth) {
  OG_ASSIGN_OR_RETURN(const ObjectMembers m, object_members(schema, pointer, depth));
  if (m.unsatisfiable) return R::ref(g_.nothing("unsatisfiable required"));
  const size_t k = m.names.size();
  const Symbol comma = g_.byte(','), close = g_.byte('}');
  // first -> the members' states; a state lists "}" when allowed, then each member that may come
  // next, then another key.
  const int32_t first = g_.new_rule("object start " + pointer);
  std::vector<int32_t> states;
  // An alternative of `rule`: (lead ? "," ws : nothing) member ws state.
  const auto step = [&](int32_t rule, bool lead, Symbol member, int32_t state) {
    std::vector<Symbol> seq;
    if (lead) seq = {comma, json_.ws()};
    seq.insert(seq.end(), {member, json_.ws(), R::ref(state)});
    g_.add_alt(rule, std::move(seq));
  };
  if (k <= kMaxAnyOrderProperties) {
    // states[s]: the members in bit set s are present.
    const size_t subsets = size_t{1} << k;
    size_t needed = 0;
    for (size_t i = 0; i < k; ++i) needed |= m.required[i] ? size_t{1} << i : 0;
    for (size_t s = 0; s < subsets; ++s) states.push_back(g_.new_rule("object " + pointer));
    for (size_t s = 0; s <= subsets; ++s) {
      const bool is_first = s == subsets;
      const size_t present = is_first ? 0 : s;
      const int32_t rule = is_first ? first : states[s];
      if ((present & needed) == needed) g_.add_alt(rule, {close});
      for (size_t i = 0; i < k; ++i) {
        if (!(present & (size_t{1} << i))) step(rule, !is_first, m.members[i], states[present | (size_t{1} << i)]);
      }
      if (m.other) step(rule, !is_first, *m.other, states[present]);
    }
  } else {
    // states[i]: declared members before i are done or skipped.
    for (size_t i = 0; i <= k; ++i) states.push_back(g_.new_rule("object " + pointer));
    for (size_t i = 0; i <= k + 1; ++i) {
      const bool is_first = i == k + 1;
      const size_t from = is_first ? 0 : i;
      const int32_t rule = is_first ? first : states[i];
      const bool rest_optional = std::none_of(m.required.begin() + static_cast<std::ptrdiff_t>(from), m.required.end(),
                                              [](bool r) { return r; });
      if (rest_optional) g_.add_alt(rule, {close});
      for (size_t j = from; j < k; ++j) {
        step(rule, !is_first, m.members[j], states[j + 1]);
        if (m.required[j]) break;  // a required member cannot be skipped
      }
      if (m.other) step(rule, !is_first, *m.other, states[from]);
    }
  }
  const int32_t object = g_.new_rule("object " + pointer);
  g_.add_alt(object, {g_.byte('{'), json_.ws(), R::ref(first)});
  return R::ref(object);
}

}  // namespace onnx_genai::constraints
