// The text of a Lark-style grammar (the dialect llguidance accepts) parsed into definitions.
// This file knows the syntax only; lark_grammar.h gives it meaning (bytes, %ignore, recursion).
//
//   start: expr                       rules are lowercase (optionally ?name, !name, _name)
//   expr: expr "+" term | term        alternatives; a newline then '|' continues them
//   NUMBER: /[0-9]+/ ("." /[0-9]+/)?  terminals are uppercase and regular
//   %ignore " "                       // and # comments
//   call: <tool_call> body </tool_call>  one token by its text <...>, or by id: <[151657]>
//   ids: <[128000-128255]> <[1,5-9]>  one token of a set of ids (llguidance), <[^7]> every id
//                                     but those, <[*]> any id
//   line[stop="\n"]: /.*/            llguidance's lexeme options on a rule: lazy, stop=X,
//                                     suffix=X (X a string, regex or terminal name)
//
// %import common.NAME [-> ALIAS] and %import common (A, B) bring in the terminals of Lark's
// common library (lark_common.cc). Constructs that would change the language unnoticed if
// skipped are refused here with their line:column: other imports, %declare, %override, %extend,
// priorities (name.2), templates (name{x}), the rule options that need the sampler or report
// captures (max_tokens, temperature, capture, stop_capture) and stop="" / suffix="" (the stop
// token hidden so that the grammar goes on), & and ~ in terminals, %regex, @grammar references
// and %llguidance options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::constraints {

struct LarkPosition {
  int line = 1;
  int column = 1;
};

// "lark grammar:LINE:COLUMN: what".
Status lark_error(LarkPosition at, const std::string& what);

struct LarkExpr {
  enum class Kind {
    kChoice,    // children: alternatives
    kSequence,  // children: in order (none: the empty string)
    kLiteral,   // text: the string's bytes; ignore_case: the i flag
    kRange,     // text, text2: "a".."z", each one character
    kRegex,     // text: the pattern; flags: its flag letters
    kName,      // text: a rule or terminal name
    kRepeat,    // children[0] repeated min..max times (max < 0: unbounded)
    kJson,      // text: a JSON Schema (%json { ... })
    kToken,     // text: as written (<|im_end|>, <[151645]>); token_id: the id of <[id]>, else -1;
                // a set (<[1-5,9]>, <[^7]>, <[*]>): token_set, token_ranges, token_negated
  };
  Kind kind = Kind::kSequence;
  LarkPosition at;
  std::vector<LarkExpr> children;
  std::string text;
  std::string text2;
  std::string flags;
  bool ignore_case = false;
  int64_t min = 1;
  int64_t max = 1;
  int32_t token_id = -1;
  bool token_set = false;
  bool token_negated = false;                           // every id but token_ranges (<[*]>: none)
  std::vector<std::pair<int32_t, int32_t>> token_ranges;  // inclusive, as written
};

// A rule's lexeme options (llguidance): name[lazy], name[stop=X], name[suffix=X]. Any of them
// makes the rule one lazy lexeme.
struct LarkRuleOptions {
  enum class Until { kNone, kStop, kSuffix };
  bool lazy = false;
  Until until = Until::kNone;
  LarkExpr value;  // X of stop= or suffix=: a string, "a".."z", a regex or a terminal name
  bool lexeme() const { return lazy || until != Until::kNone; }
};

struct LarkDefinition {
  std::string name;
  bool terminal = false;  // an uppercase name (optionally _NAME)
  LarkPosition at;
  LarkExpr body;
  LarkRuleOptions options;
};

// %import MODULE.NAME [-> ALIAS], or one name of %import MODULE (NAME, ...).
struct LarkImport {
  std::string module;
  std::string name;
  std::string alias;  // empty: the name itself
  LarkPosition at;
};

struct LarkSyntax {
  std::vector<LarkDefinition> definitions;
  std::vector<LarkExpr> ignores;  // the operands of %ignore, in order
  std::vector<LarkImport> imports;
};

// Repeat counts above this ({n}, ~ n..m) are refused (the grammar would be too large).
inline constexpr int64_t kMaxLarkRepeat = 10000;

Result<LarkSyntax> parse_lark_syntax(std::string_view text);

// Adds the definitions `syntax.imports` names (from Lark's common library); refuses other
// modules and names it does not have.
Status add_lark_imports(LarkSyntax& syntax);

}  // namespace onnx_genai::constraints
