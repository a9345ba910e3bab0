// Intersections and differences of regular languages, which a context-free grammar cannot
// spell directly: the languages' lazy DFAs (automaton.h) are walked in step, and every product
// state reached becomes one grammar rule. A text is in the result when each plain term accepts it
// and no negated term does. JSON Schema needs this where two conditions meet on one string: a
// pattern with a length, patternProperties' keys (in one pattern, not in another, not a declared
// name), propertyNames.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "constraints/automaton.h"
#include "constraints/regex_compiler.h"

namespace onnx_genai::constraints {

class RegularProduct {
 public:
  // Product states past which build() gives up (each is a rule with up to 256 byte classes).
  static constexpr size_t kMaxStates = 2048;

  // A term: the texts `pattern` matches (under `options`), or with `negated` the texts it does
  // not. Every term must read the same encoding; at least one must be plain.
  Status add(std::string_view pattern, const RegexOptions& options, bool negated = false);
  // A rule of `g` matching the product's language; `empty` (when given) tells whether it is
  // empty. Fails past kMaxStates states.
  Result<int32_t> build(GrammarBuilder& g, const std::string& name, bool* empty = nullptr) const;

 private:
  struct Term {
    std::shared_ptr<Automaton> automaton;
    bool negated;
  };
  std::vector<Term> terms_;
};

// A regex matching exactly `text` (every syntax character escaped).
std::string regex_literal(std::string_view text);

// One regex over UTF-8 text (the encoding in its options is ignored), compiled once and asked of
// many texts (patternProperties' and propertyNames' conditions of each declared name).
class RegexMatcher {
 public:
  static Result<RegexMatcher> compile(std::string_view pattern, RegexOptions options);
  Result<bool> matches(std::string_view text) const { return automaton_->accepts(text); }

 private:
  explicit RegexMatcher(std::shared_ptr<Automaton> automaton) : automaton_(std::move(automaton)) {}
  std::shared_ptr<Automaton> automaton_;  // its states grow lazily as texts are read
};

}  // namespace onnx_genai::constraints
