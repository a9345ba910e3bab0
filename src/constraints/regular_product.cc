#include "constraints/regular_product.h"

#include <algorithm>
#include <map>

namespace onnx_genai::constraints {

Status RegularProduct::add(std::string_view pattern, const RegexOptions& options, bool negated) {
  GrammarBuilder g;
  OG_ASSIGN_OR_RETURN(const int32_t rule, add_regex(g, pattern, options));
  OG_ASSIGN_OR_RETURN(Grammar grammar, g.build(rule));
  terms_.push_back({std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(grammar))), negated});
  return Status::ok();
}

Result<int32_t> RegularProduct::build(GrammarBuilder& g, const std::string& name, bool* empty) const {
  using States = std::vector<int32_t>;  // one automaton state per term
  std::map<States, size_t> index;
  std::vector<States> states;
  const auto intern = [&](States s) {
    auto [it, fresh] = index.emplace(std::move(s), states.size());
    if (fresh) states.push_back(it->first);
    return it->second;
  };
  States start;
  for (const Term& t : terms_) {
    OG_ASSIGN_OR_RETURN(const int32_t s, t.automaton->start());
    start.push_back(s);
  }
  intern(std::move(start));
  // Breadth first: each state's successors by byte, grouped by the state they lead to.
  std::vector<std::vector<std::pair<ByteSet, size_t>>> edges;
  std::vector<bool> accepting;
  for (size_t at = 0; at < states.size(); ++at) {
    if (states.size() > kMaxStates) return OG_ERROR("more than ", kMaxStates, " states in the product of regular languages");
    bool accepts = true;
    for (size_t k = 0; k < terms_.size(); ++k) accepts = accepts && terms_[k].automaton->accepting(states[at][k]) != terms_[k].negated;
    accepting.push_back(accepts);
    std::map<size_t, ByteSet> by_target;
    for (int byte = 0; byte < 256; ++byte) {
      States next;
      bool alive = true;
      for (size_t k = 0; k < terms_.size() && alive; ++k) {
        OG_ASSIGN_OR_RETURN(const int32_t s, terms_[k].automaton->next(states[at][k], static_cast<uint8_t>(byte)));
        alive = s != Automaton::kDead || terms_[k].negated;  // a negated term that died never accepts again
        next.push_back(s);
      }
      if (alive) by_target[intern(std::move(next))].set(static_cast<uint8_t>(byte));
    }
    edges.emplace_back();
    for (auto& [target, bytes] : by_target) edges.back().emplace_back(bytes, target);
  }
  std::vector<int32_t> rules(states.size());
  for (int32_t& r : rules) r = g.new_rule(name);
  for (size_t s = 0; s < states.size(); ++s) {
    if (accepting[s]) g.add_alt(rules[s], {});
    for (const auto& [bytes, target] : edges[s]) g.add_alt(rules[s], {g.bytes(bytes), GrammarBuilder::ref(rules[target])});
  }
  if (empty != nullptr) {
    // Empty unless an accepting state is reachable (every state here was reached from the start).
    *empty = std::none_of(accepting.begin(), accepting.end(), [](bool a) { return a; });
  }
  return rules[0];
}

std::string regex_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Result<RegexMatcher> RegexMatcher::compile(std::string_view pattern, RegexOptions options) {
  GrammarBuilder g;
  options.encoding = TextEncoding::kUtf8;
  OG_ASSIGN_OR_RETURN(const int32_t rule, add_regex(g, pattern, options));
  OG_ASSIGN_OR_RETURN(Grammar grammar, g.build(rule));
  return RegexMatcher(std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(grammar))));
}

}  // namespace onnx_genai::constraints
