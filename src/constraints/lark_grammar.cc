#include "constraints/lark_grammar.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "constraints/json_schema.h"
#include "constraints/lark_syntax.h"
#include "constraints/regex_compiler.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::constraints {
namespace {

using Kind = LarkExpr::Kind;

// Terminals referring to terminals deeper than this are refused (compiling them recurses).
constexpr int kMaxTerminalNesting = 256;
// A stop longer than this is not re-read (the automaton walks its bytes at each end of the lexeme).
constexpr size_t kMaxReread = 256;

std::string where(LarkPosition at) { return std::to_string(at.line) + ":" + std::to_string(at.column); }

class LarkCompiler {
 public:
  explicit LarkCompiler(const LarkSyntax& syntax) : syntax_(syntax) {}

  Result<Grammar> compile() {
    OG_RETURN_IF_ERROR(index_definitions());
    OG_RETURN_IF_ERROR(compile_ignores());
    for (const LarkDefinition& d : syntax_.definitions) {
      if (d.terminal) {
        OG_RETURN_IF_ERROR(terminal_rule(d.name, d.at).status());
      } else if (d.options.lexeme()) {
        OG_RETURN_IF_ERROR(compile_lexeme_rule(d));
      } else {
        OG_RETURN_IF_ERROR(compile_rule(d));
      }
    }
    OG_RETURN_IF_ERROR(check_lexemes());
    int32_t start = rules_.at("start");
    if (ignore_) {  // ignored text may also end the output
      const int32_t text = g_.new_rule("start + %ignore");
      g_.add_alt(text, {GrammarBuilder::ref(start), *ignore_});
      start = text;
    }
    Result<Grammar> grammar = g_.build(start);
    if (!grammar) return OG_ERROR("lark grammar: ", grammar.status().message());
    return grammar;
  }

 private:
  // Rules get their ids up front (they may be used before they are defined); terminals when
  // first used, so that a cycle among them is found.
  Status index_definitions() {
    for (const LarkDefinition& d : syntax_.definitions) {
      if (!definitions_.emplace(d.name, &d).second) return lark_error(d.at, "\"" + d.name + "\" is defined twice");
      if (!d.terminal) rules_[d.name] = g_.new_rule(d.name);
    }
    if (!rules_.count("start")) return OG_ERROR("lark grammar: no rule \"start\"");
    return Status::ok();
  }

  // One rule matching any sequence of the %ignore operands, each a lexeme (Lark makes each one
  // terminal).
  Status compile_ignores() {
    if (syntax_.ignores.empty()) return Status::ok();
    const int32_t one = g_.new_rule("%ignore");
    for (const LarkExpr& e : syntax_.ignores) {
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, lower(e, "%ignore", true));
      g_.add_alt(one, {lexeme(one_symbol(std::move(seq), "%ignore"), "%ignore operand", e.at)});
    }
    ignore_ = GrammarBuilder::ref(g_.repeat("%ignore*", GrammarBuilder::ref(one), 0, -1));
    return Status::ok();
  }

  // A rule's top-level alternatives; those starting with the rule itself (A: A x | y) become
  // A: y A'; A': x A' | nothing, the same language with the recursion on the right.
  Status compile_rule(const LarkDefinition& d) {
    const int32_t rule = rules_.at(d.name);
    std::vector<std::vector<Symbol>> base, tails;
    for (const LarkExpr* alt : alternatives(d.body)) {
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, lower(*alt, d.name, false));
      const bool left_recursive = !seq.empty() && seq[0].kind == Symbol::Kind::kRule && seq[0].id == rule;
      if (!left_recursive) {
        base.push_back(std::move(seq));
      } else if (seq.size() > 1) {  // A: A alone adds nothing
        tails.emplace_back(seq.begin() + 1, seq.end());
      }
    }
    if (tails.empty()) {
      for (auto& seq : base) g_.add_alt(rule, std::move(seq));
      return Status::ok();
    }
    const int32_t tail = g_.new_rule(d.name + " (left recursion)");
    for (auto& seq : tails) {
      seq.push_back(GrammarBuilder::ref(tail));
      g_.add_alt(tail, std::move(seq));
    }
    g_.add_alt(tail, {});
    for (auto& seq : base) {
      seq.push_back(GrammarBuilder::ref(tail));
      g_.add_alt(rule, std::move(seq));
    }
    return Status::ok();
  }

  // name[lazy]: X, name[stop=S]: X, name[suffix=S]: X (llguidance's lexeme options): the rule is
  // one lazy lexeme (grammar.h), its body a terminal (regular, nothing ignored inside) that ends
  // at its first match, of X alone or of X then S, cutting what began beside it. S's bytes stay
  // in the text: llguidance hides a stop by taking its tokens back, which generation here does
  // not do. A stop of one string is re-read by what follows where that must take exactly it
  // (LexemeMode::reread); a suffix never is. %ignore may come before the lexeme, as before a
  // terminal.
  Status compile_lexeme_rule(const LarkDefinition& d) {
    using Until = LarkRuleOptions::Until;
    const LarkRuleOptions& o = d.options;
    const std::string owner =
        d.name + (o.until == Until::kStop ? "[stop=...]" : o.until == Until::kSuffix ? "[suffix=...]" : "[lazy]");
    const int32_t body = g_.new_rule(owner);
    for (const LarkExpr* alt : alternatives(d.body)) {
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, lower(*alt, owner, true));
      g_.add_alt(body, std::move(seq));
    }
    int32_t rule = body;
    std::string reread;
    if (o.until != Until::kNone) {
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> until, lower(o.value, owner, true));
      if (o.until == Until::kStop) reread = g_.single_string(until, kMaxReread).value_or("");
      until.insert(until.begin(), GrammarBuilder::ref(body));
      rule = g_.new_rule(owner + " and its end");
      g_.add_alt(rule, std::move(until));
    }
    lexemes_.push_back({rule, "rule " + owner, d.at, " (a lazy lexeme would end before its first byte)"});
    std::vector<Symbol> seq;
    if (ignore_) seq.push_back(*ignore_);
    seq.push_back(g_.lazy_lexeme(rule, std::move(reread)));
    g_.add_alt(rules_.at(d.name), std::move(seq));
    return Status::ok();
  }

  static std::vector<const LarkExpr*> alternatives(const LarkExpr& body) {
    std::vector<const LarkExpr*> out;
    if (body.kind != Kind::kChoice) return {&body};
    for (const LarkExpr& alt : body.children) out.push_back(&alt);
    return out;
  }

  Result<int32_t> terminal_rule(const std::string& name, LarkPosition used_at) {
    if (auto it = terminals_.find(name); it != terminals_.end()) {
      if (it->second < 0) return lark_error(used_at, "terminal " + name + " refers to itself (terminals are regular; use a rule)");
      return it->second;
    }
    if (terminal_nesting_ >= kMaxTerminalNesting) {
      return lark_error(used_at, "terminals nested deeper than " + std::to_string(kMaxTerminalNesting));
    }
    const LarkDefinition& d = *definitions_.at(name);
    terminals_[name] = -1;  // in progress
    const int32_t rule = g_.new_rule(name);
    ++terminal_nesting_;
    for (const LarkExpr* alt : alternatives(d.body)) {
      Result<std::vector<Symbol>> seq = lower(*alt, name, true);
      if (!seq) {
        --terminal_nesting_;
        return seq.status();
      }
      g_.add_alt(rule, std::move(seq).value());
    }
    --terminal_nesting_;
    terminals_[name] = rule;
    return rule;
  }

  // Symbols matching `e` inside definition `owner`. Inside terminals (`in_terminal`) nothing is
  // ignored; in rules, %ignore may come before every terminal, string and regex.
  Result<std::vector<Symbol>> lower(const LarkExpr& e, const std::string& owner, bool in_terminal) {
    std::vector<Symbol> out;
    if (ignore_ && !in_terminal && is_lexeme(e)) out.push_back(*ignore_);
    switch (e.kind) {
      case Kind::kChoice: {
        const int32_t rule = g_.new_rule(owner + " (" + where(e.at) + ")");
        for (const LarkExpr& alt : e.children) {
          OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, lower(alt, owner, in_terminal));
          g_.add_alt(rule, std::move(seq));
        }
        out.push_back(GrammarBuilder::ref(rule));
        return out;
      }
      case Kind::kSequence:
        for (const LarkExpr& item : e.children) {
          OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, lower(item, owner, in_terminal));
          out.insert(out.end(), seq.begin(), seq.end());
        }
        return out;
      case Kind::kRepeat: {
        OG_ASSIGN_OR_RETURN(std::vector<Symbol> body, lower(e.children[0], owner, in_terminal));
        const std::string name = owner + " (" + where(e.at) + ")";
        out.push_back(GrammarBuilder::ref(g_.repeat(name, one_symbol(std::move(body), name), e.min, e.max)));
        return out;
      }
      case Kind::kLiteral: return literal(e, std::move(out));
      case Kind::kRange: return range(e, std::move(out));
      case Kind::kRegex: return regex(e, in_terminal, std::move(out));
      case Kind::kName: return name(e, owner, in_terminal, std::move(out));
      case Kind::kJson: return json(e, in_terminal, std::move(out));
      case Kind::kToken: return token(e, owner, in_terminal, std::move(out));
    }
    return lark_error(e.at, "internal: unknown expression");
  }

  // What a lexer would read as one token: strings, regexes, terminals, named tokens (and %json's value).
  bool is_lexeme(const LarkExpr& e) const {
    if (e.kind == Kind::kName) {
      auto it = definitions_.find(e.text);
      return it != definitions_.end() && it->second->terminal;
    }
    return e.kind != Kind::kChoice && e.kind != Kind::kSequence && e.kind != Kind::kRepeat;
  }

  // Terminals and regexes in rules are read with the longest match, as Lark's lexer reads them.
  // Strings are fixed, so they stay bytes. Each lexeme is remembered to refuse empty ones.
  Symbol lexeme(Symbol rule_or_bytes, const std::string& what, LarkPosition at) {
    if (rule_or_bytes.is_bytes()) {  // a one-byte lexeme cannot grow
      return rule_or_bytes;
    }
    lexemes_.push_back({rule_or_bytes.id, what, at, ""});
    return GrammarBuilder::lexeme(rule_or_bytes.id);
  }

  Status check_lexemes() const {
    const std::vector<bool> empty = g_.nullable();
    for (const auto& l : lexemes_) {
      if (empty[static_cast<size_t>(l.rule)]) {
        const std::string why = l.why.empty() ? " (Lark's dynamic lexer refuses zero-width terminals)" : l.why;
        return lark_error(l.at, l.what + " matches the empty string" + why);
      }
    }
    return Status::ok();
  }

  Symbol one_symbol(std::vector<Symbol> seq, const std::string& name) {
    if (seq.size() == 1) return seq[0];
    const int32_t rule = g_.new_rule(name);
    g_.add_alt(rule, std::move(seq));
    return GrammarBuilder::ref(rule);
  }

  Result<std::vector<Symbol>> literal(const LarkExpr& e, std::vector<Symbol> out) {
    for (const char c : e.text) {
      const auto b = static_cast<uint8_t>(c);
      if (!e.ignore_case || !std::isalpha(b)) {
        if (e.ignore_case && b >= 0x80) return lark_error(e.at, "the i flag on a string with non-ASCII characters is not supported");
        out.push_back(g_.byte(c));
        continue;
      }
      ByteSet both;
      both.set(static_cast<uint8_t>(std::tolower(b)));
      both.set(static_cast<uint8_t>(std::toupper(b)));
      out.push_back(g_.bytes(both));
    }
    return out;
  }

  Result<std::vector<Symbol>> range(const LarkExpr& e, std::vector<Symbol> out) {
    size_t i = 0, j = 0;
    const char32_t lo = unicode::next_code_point(e.text, i), hi = unicode::next_code_point(e.text2, j);
    if (i != e.text.size() || j != e.text2.size()) return lark_error(e.at, "a range \"a\"..\"z\" needs one character on each side");
    if (hi < lo) return lark_error(e.at, "range out of order");
    if (e.ignore_case) return lark_error(e.at, "the i flag on a range is not supported");
    CharClass set;
    set.add(lo, hi);
    out.push_back(GrammarBuilder::ref(char_class_rule(g_, set, TextEncoding::kUtf8)));
    return out;
  }

  Result<std::vector<Symbol>> regex(const LarkExpr& e, bool in_terminal, std::vector<Symbol> out) {
    RegexOptions options;
    options.dialect = RegexDialect::kLark;
    for (const char flag : e.flags) {
      if (flag != 's') return lark_error(e.at, std::string("regex flag '") + flag + "' is not supported");
      options.dot_all = true;
    }
    Result<int32_t> rule = add_regex(g_, e.text, options);
    if (!rule) return lark_error(e.at, "in /" + e.text + "/: " + rule.status().message());
    out.push_back(in_terminal ? GrammarBuilder::ref(*rule) : lexeme(GrammarBuilder::ref(*rule), "/" + e.text + "/", e.at));
    return out;
  }

  Result<std::vector<Symbol>> name(const LarkExpr& e, const std::string& owner, bool in_terminal, std::vector<Symbol> out) {
    auto it = definitions_.find(e.text);
    if (it == definitions_.end()) return lark_error(e.at, "\"" + e.text + "\" is not defined");
    if (!it->second->terminal) {
      if (in_terminal) return lark_error(e.at, "rule \"" + e.text + "\" inside terminal " + owner + " (terminals are regular)");
      out.push_back(GrammarBuilder::ref(rules_.at(e.text)));
      return out;
    }
    OG_ASSIGN_OR_RETURN(const int32_t rule, terminal_rule(e.text, e.at));
    out.push_back(in_terminal ? GrammarBuilder::ref(rule) : lexeme(GrammarBuilder::ref(rule), "terminal " + e.text, it->second->at));
    return out;
  }

  Result<std::vector<Symbol>> json(const LarkExpr& e, bool in_terminal, std::vector<Symbol> out) {
    if (in_terminal) return lark_error(e.at, "%json inside a terminal");
    Result<Grammar> schema = compile_json_schema(e.text);
    if (!schema) return lark_error(e.at, "in %json: " + schema.status().message());
    out.push_back(GrammarBuilder::ref(g_.embed(*schema)));
    return out;
  }

  // One token by id, or one of a set (bound to the vocabulary when the grammar meets one). A
  // terminal is text, so it cannot hold a token (llguidance refuses that too).
  Result<std::vector<Symbol>> token(const LarkExpr& e, const std::string& owner, bool in_terminal, std::vector<Symbol> out) {
    if (in_terminal) {
      const std::string inside = owner == "%ignore" ? owner : "terminal " + owner;
      return lark_error(e.at, "token " + e.text + " inside " + inside + " (tokens may come only in rules)");
    }
    GrammarToken token{.text = e.text, .id = e.token_id, .where = "lark grammar:" + where(e.at)};
    token.set = e.token_set;
    token.negated = e.token_negated;
    token.ranges = join_ranges(e.token_ranges);
    out.push_back(g_.token(std::move(token)));
    return out;
  }

  const LarkSyntax& syntax_;
  GrammarBuilder g_;
  std::map<std::string, const LarkDefinition*> definitions_;
  std::map<std::string, int32_t> rules_;
  std::map<std::string, int32_t> terminals_;  // -1 while its definition is being compiled
  std::optional<Symbol> ignore_;              // any run of %ignore operands
  struct Lexeme {
    int32_t rule;
    std::string what;
    LarkPosition at;
    std::string why;  // why an empty match is refused, when not Lark's reason
  };
  std::vector<Lexeme> lexemes_;
  int terminal_nesting_ = 0;
};

}  // namespace

Result<Grammar> compile_lark_grammar(std::string_view text) {
  OG_ASSIGN_OR_RETURN(LarkSyntax syntax, parse_lark_syntax(text));
  OG_RETURN_IF_ERROR(add_lark_imports(syntax));
  LarkCompiler compiler(syntax);
  return compiler.compile();
}

}  // namespace onnx_genai::constraints
