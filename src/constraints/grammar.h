// A context-free grammar over bytes: what every constraint (JSON Schema, regex) compiles to.
// Rules have alternatives; an alternative is a sequence of symbols, each a byte class (a set of
// bytes matched by one input byte) or a reference to a rule. The finished grammar is one flat
// array of positions so that a parser state is a position plus a return stack (automaton.h).
//
//   GrammarBuilder g;
//   const int32_t digits = g.new_rule("digits");
//   g.add_alt(digits, {g.bytes('0', '9'), g.ref(digits)});
//   g.add_alt(digits, {g.bytes('0', '9')});
//   auto grammar = g.build(digits);   // Result<Grammar>
//
// Grammars must not be left-recursive (a rule reaching itself before consuming a byte): build()
// names the rule. Repetition is right recursion, which the automaton runs in constant stack
// (a reference in tail position returns straight to its caller's caller).
//
// A lexeme (g.lexeme(rule)) is a rule read as one token with the longest match, as a lexer
// reads a terminal: its text may end only where no longer match follows (A: /a+/ then "a" never
// splits "aa"). The rule must be regular and not match the empty string. A lazy lexeme
// (g.lazy_lexeme(rule, reread): llguidance's rule options [lazy], stop=, suffix=) ends at its
// first match instead; LexemeMode says what follows it.
//
// A token symbol (g.token(...)) is one vocabulary token matched by its id, not by bytes: a
// special token such as <|im_end|>. The grammar names it; CompiledConstraint binds the name to
// an id when the grammar meets a vocabulary. A token set (<[1-5,9]>, <[^7]>, <[*]>) is one
// token of several, also by id; its ordinary tokens keep their bytes elsewhere (matcher.cc).
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::constraints {

using ByteSet = std::bitset<256>;

// One symbol of an alternative: a byte class (index into the grammar's classes), a rule, a
// lexeme (a rule matched by longest match; id is the rule), or a token (index into the
// grammar's tokens).
struct Symbol {
  enum class Kind : uint8_t { kBytes, kRule, kLexeme, kToken };
  Kind kind = Kind::kBytes;
  int32_t id = 0;
  bool is_bytes() const { return kind == Kind::kBytes; }
  // Matches input by itself (a byte or a token), without a rule behind it.
  bool is_terminal() const { return kind == Kind::kBytes || kind == Kind::kToken; }
};

// How a lexeme ends. Greedy (the default): at its longest match. Lazy: at its first match, so
// the text after it may extend the match; and what began where it began (other lexemes, bytes,
// what follows them) dies there, as llguidance's lexer emits it at once. `reread` (llguidance's
// stop=S where S matches one string): those bytes, the end of the lexeme's match, are read again
// by what follows it where every parse there takes exactly them first (outer: with_stop "<end>"
// spells "<end>" once), as llguidance re-reads a stop it would hide; elsewhere what follows
// comes after them.
struct LexemeMode {
  bool lazy = false;
  std::string reread;
};

// A vocabulary token the grammar names (Lark's <|im_end|> or <[151645]>), or a set of tokens
// (llguidance's <[128000-128255]>, <[1,5-9]>, <[^7]>, <[*]>) of which any one matches.
struct GrammarToken {
  using IdRange = std::pair<int32_t, int32_t>;  // inclusive
  std::string text;   // as written, for errors: "<|im_end|>", "<[151645]>"
  int32_t id = -1;    // one token: its id; -1 until bound by its text (and for a set)
  std::string where;  // where it was written, for errors: "lark grammar:3:7"
  bool set = false;
  // A set's ids, sorted and disjoint. `negated` (<[^7]>; <[*]> negates nothing) until bound to a
  // vocabulary, which turns them into the ids they leave.
  std::vector<IdRange> ranges;
  bool negated = false;
  // Whether `token` is this one or in this set (bound).
  bool contains(int32_t token) const;
};

// Sorted, overlapping and adjacent ranges joined; the ones out of order (a > b) dropped.
std::vector<GrammarToken::IdRange> join_ranges(std::vector<GrammarToken::IdRange> ranges);

class Grammar {
 public:
  // Code entries: a byte class in [0, kTokenBase), token k as kTokenBase + k, lexeme k as
  // kLexemeBase + k, kEnd the end of an alternative, else the rule -(code + 1).
  static constexpr int32_t kEnd = INT32_MIN;
  static constexpr int32_t kTokenBase = 1 << 29;
  static constexpr int32_t kLexemeBase = 1 << 30;
  static bool is_rule(int32_t code) { return code < 0 && code != kEnd; }
  static int32_t rule_of(int32_t code) { return -(code + 1); }
  static bool is_lexeme(int32_t code) { return code >= kLexemeBase; }
  static bool is_token(int32_t code) { return code >= kTokenBase && code < kLexemeBase; }

  // Position 0 holds a reference to the start rule followed by kEnd: the parser starts there.
  std::vector<int32_t> code;
  std::vector<ByteSet> classes;
  std::vector<std::vector<int32_t>> alternatives;  // rule -> start position of each alternative
  std::vector<std::string> rule_names;
  // Lexeme k: its rule, and the position of a reference to that rule followed by kEnd (where a
  // parser of the lexeme alone starts).
  std::vector<int32_t> lexeme_rules;
  std::vector<int32_t> lexeme_starts;
  std::vector<LexemeMode> lexeme_modes;
  std::vector<GrammarToken> tokens;
  // How the grammar names token `id` (bound): not at all, only in sets (then its bytes still
  // spell text elsewhere), or alone (<name>, <[id]>: then only by id, only where named).
  enum class Naming { kNone, kInSet, kAlone };
  Naming naming(int32_t id) const;
  // Bytes no class tells apart move the parser alike: byte -> its kind, kind -> its bytes. The
  // automaton computes a successor once per kind (a JSON string's inside is a few kinds, not
  // 256 bytes).
  std::array<uint8_t, 256> byte_kind{};
  std::vector<std::vector<uint8_t>> kind_bytes;
};

class GrammarBuilder {
 public:
  // A grammar whose build() would exceed this many symbols fails instead (schemas with huge
  // bounded repeats: {"maxLength": 1000000}).
  static constexpr size_t kMaxSymbols = size_t{1} << 21;

  int32_t new_rule(std::string name);
  void add_alt(int32_t rule, std::vector<Symbol> sequence);

  Symbol bytes(const ByteSet& set);
  Symbol bytes(uint8_t lo, uint8_t hi);
  Symbol byte(char c) { return bytes(static_cast<uint8_t>(c), static_cast<uint8_t>(c)); }
  static Symbol ref(int32_t rule) { return Symbol{Symbol::Kind::kRule, rule}; }
  static Symbol lexeme(int32_t rule) { return Symbol{Symbol::Kind::kLexeme, rule}; }
  // `rule` as a lazy lexeme (the mode is the rule's: wherever it is a lexeme, it is lazy).
  Symbol lazy_lexeme(int32_t rule, std::string reread);
  // The token `token.text` names (one symbol per distinct text; the first `where` is kept).
  Symbol token(GrammarToken token);

  // Symbols matching `text` byte by byte, appended to `out`.
  void append_literal(std::vector<Symbol>& out, std::string_view text);
  // A rule matching exactly `text`.
  int32_t literal(std::string_view text);
  // A rule matching `body` repeated min..max times (max < 0: unbounded).
  int32_t repeat(std::string name, Symbol body, int64_t min, int64_t max);
  // A rule matching one of `choices`.
  int32_t choice(std::string name, const std::vector<Symbol>& choices);
  // A rule matching nothing at all (the empty language), e.g. the schema `false`.
  int32_t nothing(std::string name) { return new_rule(std::move(name)); }

  // The one string `symbols` match, when they match exactly one (byte classes of one byte, rules
  // of one alternative), of at most `limit` bytes.
  std::optional<std::string> single_string(const std::vector<Symbol>& symbols, size_t limit) const;

  // Copies `other`'s rules into this grammar; returns the rule that was its start.
  int32_t embed(const Grammar& other);

  size_t symbols() const { return symbols_; }
  // Per rule: whether it matches the empty string.
  std::vector<bool> nullable() const;
  bool too_large() const { return symbols_ > kMaxSymbols; }

  // Fails when the grammar is too large, a rule reaches itself before any byte (left recursion),
  // a lexeme matches the empty string, or `start` is not a rule.
  Result<Grammar> build(int32_t start) const;

 private:
  std::vector<std::vector<std::vector<Symbol>>> rules_;
  std::vector<std::string> names_;
  std::vector<ByteSet> classes_;
  std::vector<GrammarToken> tokens_;
  std::map<int32_t, LexemeMode> lazy_lexemes_;  // rule -> its mode
  size_t symbols_ = 0;
};

}  // namespace onnx_genai::constraints
