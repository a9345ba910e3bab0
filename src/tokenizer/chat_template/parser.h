// Parser: a port of @huggingface/jinja's recursive-descent `parse`, so that the same templates are
// accepted and produce the same tree. Nesting is bounded so hostile input cannot exhaust the stack.
#pragma once

#include <string_view>
#include <vector>

#include "onnx_genai/status.h"
#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/lexer.h"

namespace onnx_genai::chat_template {

// Deepest nesting accepted, counted in parser recursion levels (a parenthesis costs about four, an
// {% if %} two). Bounds the parser's stack use to well under a megabyte.
inline constexpr int kMaxParseDepth = 1000;

// Parses tokens of `source` (used for error locations) into a kProgram node.
Result<NodePtr> parse(const std::vector<Token>& tokens, std::string_view source);

}  // namespace onnx_genai::chat_template
