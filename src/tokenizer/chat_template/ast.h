// Syntax tree of a template, shaped like @huggingface/jinja's AST. One node struct; which fields
// a kind uses is listed below (unused fields stay empty).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace onnx_genai::chat_template {

enum class NodeKind {
  // Statements
  kProgram,          // body
  kText,             // text
  kIf,               // a = test, body, alternate (an elif is a nested kIf alone in alternate)
  kFor,              // a = loop variable (Identifier or Tuple), b = iterable (maybe kSelect), body, alternate = else
  kSet,              // a = assignee, b = value (null for a block set), body
  kMacro,            // text = name, list = parameters, body
  kCallStatement,    // a = kCall, list = caller parameters, body
  kFilterStatement,  // a = filter (Identifier or kCall), body
  kBreak,
  kContinue,
  kComment,
  // Expressions
  kIdentifier,       // text
  kIntegerLiteral,   // number
  kFloatLiteral,     // number
  kStringLiteral,    // text
  kArrayLiteral,     // list
  kTupleLiteral,     // list
  kObjectLiteral,    // pairs
  kBinary,           // text = operator, a = left, b = right
  kUnary,            // text = operator, a = argument
  kMember,           // a = object, b = property, computed
  kCall,             // a = callee, list = arguments
  kFilter,           // a = operand, b = filter (Identifier or kCall)
  kTest,             // a = operand, text = test name, negate
  kSelect,           // a = value, b = condition (`x if c` without else)
  kTernary,          // a = condition, b = if true, c = if false
  kSlice,            // a = start, b = stop, c = step (each may be null)
  kKeywordArgument,  // text = key, a = value
  kSpread,           // a = argument (`*args`)
  kKeywordSpread,    // a = argument (`**kwargs`)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  uint32_t offset = 0;  // where it starts in the template, for error messages
  std::string text;
  double number = 0;
  bool computed = false;  // kMember: x[y] rather than x.y
  bool negate = false;    // kTest: `is not`
  NodePtr a, b, c;
  std::vector<NodePtr> list;
  std::vector<NodePtr> body, alternate;
  std::vector<std::pair<NodePtr, NodePtr>> pairs;

  Node(NodeKind k, uint32_t at) : kind(k), offset(at) {}
};

}  // namespace onnx_genai::chat_template
