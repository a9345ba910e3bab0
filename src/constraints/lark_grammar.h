// Lark-style grammars (the llguidance dialect: onnxruntime-genai's set_guidance("lark_grammar"))
// compiled to a byte grammar. The syntax is lark_syntax.h's; the meaning, here:
//
// - `start` is the start rule. Rules may recurse (nesting is the parser's stack); a rule whose
//   alternatives start with the rule itself (expr: expr "+" term | term) is rewritten to the
//   same language without left recursion. Left recursion through other rules is refused.
// - Terminals (uppercase) are regular: they may not refer to rules or to themselves.
// - %ignore X: X may come before every terminal, string or regex used in a rule (not inside
//   terminals) and at the end of the text, as Lark's Earley parser allows it.
// - %json { schema }: the JSON texts the schema accepts (json_schema.h), no whitespace around.
// - <|im_end|>, <[151645]>: that one token by id (grammar.h's token symbols), in rules only;
//   %ignore may come before it as before a terminal. <[1-5,9]>, <[^7]>, <[*]>: one token of
//   those ids (every id but those; any id), the same way.
//
// - Terminals, regexes and %ignore operands used in rules are lexemes (grammar.h): each takes
//   the longest match, as Lark's dynamic lexer matches each expected terminal where it starts
//   (A: /a+/ then "a" never accepts "aa"). Zero-width terminals are refused, as Lark does.
// - llguidance's lexeme options make a rule one lazy lexeme, its body a terminal: name[lazy]: X
//   ends at X's first match, name[suffix=S]: X and name[stop=S]: X at the first match of X then
//   S, and what began beside it dies there. S stays in the text (llguidance would take a stop's
//   tokens back); a stop of one string is read again by what follows where that must take
//   exactly it first (grammar.h's LexemeMode).
// docs/constraints.md lists what is refused.
#pragma once

#include <string_view>

#include "constraints/grammar.h"

namespace onnx_genai::constraints {

Result<Grammar> compile_lark_grammar(std::string_view text);

}  // namespace onnx_genai::constraints
