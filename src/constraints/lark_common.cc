// The terminals of Lark's common library (lark/grammars/common.lark), for %import common.NAME.
// Each is written here as one regex with the meaning of Lark's definition, so an import needs no
// other terminal; tests/constraints/lark/imports.lark holds them to Lark's own.
#include <algorithm>
#include <string_view>

#include "constraints/lark_syntax.h"

namespace onnx_genai::constraints {
namespace {

struct CommonTerminal {
  std::string_view name;
  std::string_view pattern;  // Lark's regex dialect (regex_compiler.h)
};

// An exponent is e or E, an optional sign and digits; a decimal has a point with digits on at
// least one side. Lark spells its strings and block comments with lazy repeats and a lookbehind;
// these are the same languages without them: a string ends at the first quote not escaped by a
// backslash, a comment at the first "*/".
constexpr CommonTerminal kCommon[] = {
    {"DIGIT", "[0-9]"},
    {"HEXDIGIT", "[0-9a-fA-F]"},
    {"INT", "[0-9]+"},
    {"SIGNED_INT", "[+-]?[0-9]+"},
    {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
    {"_EXP", "[eE][+-]?[0-9]+"},
    {"FLOAT", "[0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?"},
    {"SIGNED_FLOAT", "[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?)"},
    {"NUMBER", "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?"},
    {"SIGNED_NUMBER", "[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?"},
    {"ESCAPED_STRING", "\"([^\"\\\\\\n]|\\\\.)*\""},
    {"LCASE_LETTER", "[a-z]"},
    {"UCASE_LETTER", "[A-Z]"},
    {"LETTER", "[A-Za-z]"},
    {"WORD", "[A-Za-z]+"},
    {"CNAME", "[A-Za-z_][A-Za-z_0-9]*"},
    {"WS_INLINE", "[ \\t]+"},
    {"WS", "[ \\t\\f\\r\\n]+"},
    {"CR", "\\r"},
    {"LF", "\\n"},
    {"NEWLINE", "(\\r?\\n)+"},
    {"SH_COMMENT", "#[^\\n]*"},
    {"CPP_COMMENT", "//[^\\n]*"},
    {"C_COMMENT", "/\\*([^*]|\\*+[^*/])*\\*+/"},
    {"SQL_COMMENT", "--[^\\n]*"},
};

}  // namespace

Status add_lark_imports(LarkSyntax& syntax) {
  for (const LarkImport& im : syntax.imports) {
    if (im.module != "common") {
      return lark_error(im.at, "%import from \"" + im.module + "\" is not supported (only Lark's common terminals)");
    }
    const auto* t = std::find_if(std::begin(kCommon), std::end(kCommon), [&](const CommonTerminal& c) { return c.name == im.name; });
    if (t == std::end(kCommon)) return lark_error(im.at, "common." + im.name + " is not a supported terminal of Lark's common library");
    LarkDefinition d;
    d.name = im.alias.empty() ? im.name : im.alias;
    d.terminal = true;
    d.at = im.at;
    d.body.kind = LarkExpr::Kind::kRegex;
    d.body.at = im.at;
    d.body.text = std::string(t->pattern);
    syntax.definitions.push_back(std::move(d));
  }
  return Status::ok();
}

}  // namespace onnx_genai::constraints
