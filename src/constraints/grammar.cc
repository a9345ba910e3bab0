#include "constraints/grammar.h"

#include <algorithm>

namespace onnx_genai::constraints {
namespace {

// Rules with an alternative whose every symbol is a byte class, token or lexeme (when
// `bytes_count`) or such a rule, by fixpoint: without bytes, the rules that can match the empty
// string; with them, the rules that can match anything at all. A lexeme never matches the empty
// string.
std::vector<bool> rules_deriving(const std::vector<std::vector<std::vector<Symbol>>>& rules, bool bytes_count) {
  std::vector<bool> derives(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (derives[r]) continue;
      for (const auto& alt : rules[r]) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
          if (s.is_terminal()) return bytes_count;
          if (s.kind == Symbol::Kind::kLexeme && !bytes_count) return false;
          return static_cast<bool>(derives[static_cast<size_t>(s.id)]);
        });
        if (all) {
          derives[r] = changed = true;
          break;
        }
      }
    }
  }
  return derives;
}
std::vector<bool> nullable_rules(const std::vector<std::vector<std::vector<Symbol>>>& rules) {
  return rules_deriving(rules, false);
}

// A rule on a cycle of "reaches before consuming a byte" edges that pushes a stack frame (a
// reference that is not the last symbol of its alternative), or -1. Such a cycle would make the
// parser's closure push frames forever; cycles of tail references return to the same frame and
// are harmless ((a*)* is fine).
int32_t left_recursive_rule(const std::vector<std::vector<std::vector<Symbol>>>& rules) {
  const std::vector<bool> nullable = nullable_rules(rules);
  struct Edge {
    int32_t to;
    bool pushes;
  };
  std::vector<std::vector<Edge>> leads(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alt : rules[r]) {
      for (size_t k = 0; k < alt.size() && alt[k].kind == Symbol::Kind::kRule; ++k) {
        leads[r].push_back(Edge{alt[k].id, k + 1 < alt.size()});
        if (!nullable[static_cast<size_t>(alt[k].id)]) break;
      }
    }
  }
  // Tarjan's strongly connected components, iteratively (grammars have 100k+ rules).
  const size_t n = rules.size();
  std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1), stack;
  std::vector<bool> on_stack(n, false);
  int32_t counter = 0, components = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<size_t, size_t>> path{{root, 0}};
    index[root] = low[root] = counter++;
    stack.push_back(static_cast<int32_t>(root));
    on_stack[root] = true;
    while (!path.empty()) {
      auto& [v, next] = path.back();
      if (next < leads[v].size()) {
        const auto w = static_cast<size_t>(leads[v][next++].to);
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(static_cast<int32_t>(w));
          on_stack[w] = true;
          path.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        for (int32_t w = -1; w != static_cast<int32_t>(v);) {
          w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          component[static_cast<size_t>(w)] = components;
        }
        ++components;
      }
      const size_t done = v;
      path.pop_back();
      if (!path.empty()) low[path.back().first] = std::min(low[path.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : leads[r]) {
      if (e.pushes && component[static_cast<size_t>(e.to)] == component[r]) return static_cast<int32_t>(r);
    }
  }
  return -1;
}

// Partitions the bytes by their membership in every class (refining one class at a time).
void split_bytes_by_class(Grammar& g) {
  std::array<int32_t, 256> kind{};
  int32_t kinds = 1;
  for (const ByteSet& set : g.classes) {
    std::vector<int32_t> renumber(static_cast<size_t>(kinds) * 2, -1);
    int32_t next = 0;
    for (size_t b = 0; b < 256; ++b) {
      int32_t& id = renumber[static_cast<size_t>(kind[b]) * 2 + (set.test(b) ? 1 : 0)];
      if (id < 0) id = next++;
      kind[b] = id;
    }
    kinds = next;
  }
  g.kind_bytes.assign(static_cast<size_t>(kinds), {});
  for (size_t b = 0; b < 256; ++b) {
    g.byte_kind[b] = static_cast<uint8_t>(kind[b]);
    g.kind_bytes[static_cast<size_t>(kind[b])].push_back(static_cast<uint8_t>(b));
  }
}

}  // namespace

int32_t GrammarBuilder::new_rule(std::string name) {
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::add_alt(int32_t rule, std::vector<Symbol> sequence) {
  symbols_ += sequence.size() + 1;
  rules_[static_cast<size_t>(rule)].push_back(std::move(sequence));
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
  // Few distinct classes exist (digits, string bytes, UTF-8 continuations): a linear search
  // from the most recent keeps the builder free of a hash of 256-bit sets.
  for (size_t k = classes_.size(); k-- > 0;) {
    if (classes_[k] == set) return Symbol{Symbol::Kind::kBytes, static_cast<int32_t>(k)};
  }
  classes_.push_back(set);
  return Symbol{Symbol::Kind::kBytes, static_cast<int32_t>(classes_.size() - 1)};
}

Symbol GrammarBuilder::bytes(uint8_t lo, uint8_t hi) {
  ByteSet set;
  for (int b = lo; b <= hi; ++b) set.set(static_cast<size_t>(b));
  return bytes(set);
}

void GrammarBuilder::append_literal(std::vector<Symbol>& out, std::string_view text) {
  for (const char c : text) out.push_back(byte(c));
}

bool GrammarToken::contains(int32_t token) const {
  if (!set) return token == id;
  // The first range ending at or after `token`.
  const auto it = std::lower_bound(ranges.begin(), ranges.end(), token, [](const IdRange& r, int32_t t) { return r.second < t; });
  return it != ranges.end() && it->first <= token;
}

std::vector<GrammarToken::IdRange> join_ranges(std::vector<GrammarToken::IdRange> ranges) {
  std::erase_if(ranges, [](const GrammarToken::IdRange& r) { return r.first > r.second; });
  std::sort(ranges.begin(), ranges.end());
  std::vector<GrammarToken::IdRange> out;
  for (const GrammarToken::IdRange& r : ranges) {
    if (!out.empty() && static_cast<int64_t>(r.first) <= static_cast<int64_t>(out.back().second) + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

Grammar::Naming Grammar::naming(int32_t id) const {
  Naming naming = Naming::kNone;
  for (const GrammarToken& t : tokens) {
    if (!t.contains(id)) continue;
    if (!t.set) return Naming::kAlone;
    naming = Naming::kInSet;
  }
  return naming;
}

Symbol GrammarBuilder::token(GrammarToken token) {
  auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const GrammarToken& t) { return t.text == token.text; });
  if (it == tokens_.end()) {
    tokens_.push_back(std::move(token));
    it = tokens_.end() - 1;
  }
  return Symbol{Symbol::Kind::kToken, static_cast<int32_t>(it - tokens_.begin())};
}

Symbol GrammarBuilder::lazy_lexeme(int32_t rule, std::string reread) {
  lazy_lexemes_[rule] = LexemeMode{true, std::move(reread)};
  return lexeme(rule);
}

std::optional<std::string> GrammarBuilder::single_string(const std::vector<Symbol>& symbols, size_t limit) const {
  std::string out;
  // Depth-first through rules of one alternative. The steps are bounded too: a rule of one
  // alternative may refer to itself (before build() refuses it).
  std::vector<const Symbol*> work;
  for (auto it = symbols.rbegin(); it != symbols.rend(); ++it) work.push_back(&*it);
  for (size_t steps = 0; !work.empty(); ++steps) {
    if (steps > 16 * limit) return std::nullopt;
    const Symbol& s = *work.back();
    work.pop_back();
    if (s.kind == Symbol::Kind::kBytes) {
      const ByteSet& set = classes_[static_cast<size_t>(s.id)];
      if (set.count() != 1 || out.size() >= limit) return std::nullopt;
      size_t b = 0;
      while (!set.test(b)) ++b;
      out += static_cast<char>(b);
      continue;
    }
    if (s.kind != Symbol::Kind::kRule || rules_[static_cast<size_t>(s.id)].size() != 1) return std::nullopt;
    const std::vector<Symbol>& alt = rules_[static_cast<size_t>(s.id)][0];
    if (work.size() + alt.size() > limit) return std::nullopt;
    for (auto it = alt.rbegin(); it != alt.rend(); ++it) work.push_back(&*it);
  }
  return out;
}

int32_t GrammarBuilder::literal(std::string_view text) {
  const int32_t rule = new_rule("literal");
  std::vector<Symbol> sequence;
  append_literal(sequence, text);
  add_alt(rule, std::move(sequence));
  return rule;
}

int32_t GrammarBuilder::repeat(std::string name, Symbol body, int64_t min, int64_t max) {
  // tail := body tail | ε for the unbounded part; opt_k := body opt_{k-1} | ε for a bounded
  // one. Both recurse in tail position, so the parser's stack stays flat.
  int32_t tail = new_rule(name + "*");
  if (max < 0) {
    add_alt(tail, {body, ref(tail)});
    add_alt(tail, {});
  } else {
    add_alt(tail, {});
    for (int64_t k = min; k < max && !too_large(); ++k) {
      const int32_t outer = new_rule(name + "?");
      add_alt(outer, {body, ref(tail)});
      add_alt(outer, {});
      tail = outer;
    }
  }
  const int32_t rule = new_rule(name);
  std::vector<Symbol> sequence;
  for (int64_t k = 0; k < min && !too_large(); ++k) {
    sequence.push_back(body);
    ++symbols_;
  }
  sequence.push_back(ref(tail));
  add_alt(rule, std::move(sequence));
  return rule;
}

int32_t GrammarBuilder::choice(std::string name, const std::vector<Symbol>& choices) {
  const int32_t rule = new_rule(std::move(name));
  for (const Symbol& s : choices) add_alt(rule, {s});
  return rule;
}

int32_t GrammarBuilder::embed(const Grammar& other) {
  const auto base = static_cast<int32_t>(rules_.size());
  std::vector<Symbol> classes;
  for (const ByteSet& set : other.classes) classes.push_back(bytes(set));
  for (const std::string& name : other.rule_names) new_rule(name);
  for (size_t r = 0; r < other.alternatives.size(); ++r) {
    for (const int32_t start : other.alternatives[r]) {
      std::vector<Symbol> sequence;
      for (auto p = static_cast<size_t>(start); other.code[p] != Grammar::kEnd; ++p) {
        const int32_t code = other.code[p];
        if (Grammar::is_rule(code)) {
          sequence.push_back(ref(base + Grammar::rule_of(code)));
        } else if (Grammar::is_lexeme(code)) {
          const auto k = static_cast<size_t>(code - Grammar::kLexemeBase);
          const int32_t rule = base + other.lexeme_rules[k];
          const LexemeMode& mode = other.lexeme_modes[k];
          sequence.push_back(mode.lazy ? lazy_lexeme(rule, mode.reread) : lexeme(rule));
        } else if (Grammar::is_token(code)) {
          sequence.push_back(token(other.tokens[static_cast<size_t>(code - Grammar::kTokenBase)]));
        } else {
          sequence.push_back(classes[static_cast<size_t>(code)]);
        }
      }
      add_alt(base + static_cast<int32_t>(r), std::move(sequence));
    }
  }
  return base + Grammar::rule_of(other.code[0]);
}

std::vector<bool> GrammarBuilder::nullable() const { return nullable_rules(rules_); }

Result<Grammar> GrammarBuilder::build(int32_t start) const {
  if (start < 0 || static_cast<size_t>(start) >= rules_.size()) return OG_ERROR("grammar: no start rule");
  if (too_large()) {
    return OG_ERROR("grammar: more than ", kMaxSymbols, " symbols (a bounded repeat or an enumeration too large)");
  }
  if (const int32_t rule = left_recursive_rule(rules_); rule >= 0) {
    return OG_ERROR("grammar: rule \"", names_[static_cast<size_t>(rule)],
                    "\" reaches itself before matching any byte (left recursion)");
  }
  // An alternative through a rule that matches nothing is dropped, so that every stack the parser
  // keeps can still complete: a state that is not dead is a prefix of some sentence.
  const std::vector<bool> productive = rules_deriving(rules_, true);
  const auto is_productive = [&](const std::vector<Symbol>& alt) {
    return std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) { return s.is_terminal() || productive[static_cast<size_t>(s.id)]; });
  };
  const std::vector<bool> empty = nullable_rules(rules_);
  Grammar g;
  g.classes = classes_;
  g.tokens = tokens_;
  g.rule_names = names_;
  g.code = {-(start + 1), Grammar::kEnd};
  g.alternatives.resize(rules_.size());
  std::vector<int32_t> lexeme_of(rules_.size(), -1);
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& alt : rules_[r]) {
      if (!is_productive(alt)) continue;
      g.alternatives[r].push_back(static_cast<int32_t>(g.code.size()));
      for (const Symbol& s : alt) {
        if (s.kind != Symbol::Kind::kLexeme) {
          g.code.push_back(s.is_bytes() ? s.id : s.kind == Symbol::Kind::kToken ? Grammar::kTokenBase + s.id : -(s.id + 1));
          continue;
        }
        int32_t& k = lexeme_of[static_cast<size_t>(s.id)];
        if (k < 0) {
          if (empty[static_cast<size_t>(s.id)]) {
            return OG_ERROR("grammar: lexeme \"", names_[static_cast<size_t>(s.id)], "\" matches the empty string");
          }
          k = static_cast<int32_t>(g.lexeme_rules.size());
          g.lexeme_rules.push_back(s.id);
          const auto mode = lazy_lexemes_.find(s.id);
          g.lexeme_modes.push_back(mode != lazy_lexemes_.end() ? mode->second : LexemeMode{});
        }
        g.code.push_back(Grammar::kLexemeBase + k);
      }
      g.code.push_back(Grammar::kEnd);
    }
  }
  for (const int32_t rule : g.lexeme_rules) {
    g.lexeme_starts.push_back(static_cast<int32_t>(g.code.size()));
    g.code.insert(g.code.end(), {-(rule + 1), Grammar::kEnd});
  }
  split_bytes_by_class(g);
  return g;
}

}  // namespace onnx_genai::constraints
