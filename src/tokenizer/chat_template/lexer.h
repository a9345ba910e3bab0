// Template lexer: a port of @huggingface/jinja's `tokenize`, including its preprocessing
// (lstrip_blocks and trim_blocks as HF configures them, {% generation %} tags removed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::chat_template {

enum class TokenType {
  kText,
  kNumericLiteral,
  kStringLiteral,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenSquareBracket,
  kCloseSquareBracket,
  kOpenCurlyBracket,
  kCloseCurlyBracket,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditiveBinaryOperator,
  kMultiplicativeBinaryOperator,
  kExponentiationBinaryOperator,
  kComparisonBinaryOperator,
  kUnaryOperator,
  kComment,
  kEnd,  // sentinel after the last token, so the parser never reads past the end
};

const char* token_type_name(TokenType type);

struct Token {
  TokenType type;
  std::string value;
  uint32_t offset;  // byte offset in the original template, for error locations
};

// Formats "line L, column C" (1-based; columns count code points) for a byte offset.
std::string describe_location(std::string_view source, uint32_t offset);

// Tokenizes `source`; errors name the line and column.
Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace onnx_genai::chat_template
