#include "tokenizer/chat_template/parser.h"

#include <cstdlib>
#include <initializer_list>
#include <set>

#include "tokenizer/chat_template/depth_guard.h"

namespace onnx_genai::chat_template {

namespace {

#define OG_PARSE(lhs, expr) OG_ASSIGN_OR_RETURN(lhs, expr)

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view source) : tokens_(tokens), source_(source) {}

  Result<NodePtr> parse_program() {
    auto program = make(NodeKind::kProgram);
    while (peek().type != TokenType::kEnd) {
      OG_PARSE(NodePtr statement, parse_any());
      program->body.push_back(std::move(statement));
    }
    return program;
  }

 private:
  enum class ArgsMode { kCall, kParameters };

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(current_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& token = peek();
    if (current_ + 1 < tokens_.size()) ++current_;
    return token;
  }
  bool is(TokenType type, size_t ahead = 0) const { return peek(ahead).type == type; }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    return is(TokenType::kIdentifier, ahead) && peek(ahead).value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(TokenType::kOpenStatement) || !is(TokenType::kIdentifier, 1)) return false;
    for (std::string_view name : names) {
      if (peek(1).value == name) return true;
    }
    return false;
  }
  NodePtr make(NodeKind kind) const { return std::make_unique<Node>(kind, peek().offset); }
  Status error(const std::string& message) const {
    return OG_ERROR("chat template ", describe_location(source_, peek().offset), ": ", message);
  }
  Status expect(TokenType type, std::string_view what) {
    if (!is(type)) {
      return error(std::string(what) + ", got " + token_type_name(peek().type) + " '" + peek().value + "'");
    }
    next();
    return Status::ok();
  }
  Status expect_identifier(std::string_view name) {
    if (!is_identifier(name)) return error("Expected " + std::string(name));
    next();
    return Status::ok();
  }
  Status check_depth() const {
    return depth_ > kMaxParseDepth ? error("template nests deeper than " + std::to_string(kMaxParseDepth) + " levels")
                                   : Status::ok();
  }
  // Parses statements into `into` until one of `names` opens the next statement.
  Status parse_until(std::initializer_list<std::string_view> names, std::vector<NodePtr>& into) {
    while (!is_statement(names)) {
      OG_PARSE(NodePtr statement, parse_any());
      into.push_back(std::move(statement));
    }
    return Status::ok();
  }
  // `{% endname %}`
  Status expect_end(std::string_view name) {
    OG_RETURN_IF_ERROR(expect(TokenType::kOpenStatement, "Expected {% token"));
    OG_RETURN_IF_ERROR(expect_identifier(name));
    return expect(TokenType::kCloseStatement, "Expected %} token");
  }

  Result<NodePtr> parse_any();
  Result<NodePtr> parse_statement();
  Result<NodePtr> parse_call_statement();
  Result<NodePtr> parse_filter_statement();
  Result<NodePtr> parse_set();
  Result<NodePtr> parse_if();
  Result<NodePtr> parse_macro();
  Result<NodePtr> parse_for();
  Result<NodePtr> parse_expression_sequence(bool primary);
  Result<NodePtr> parse_expression();
  Result<NodePtr> parse_logical_or();
  Result<NodePtr> parse_logical_and();
  Result<NodePtr> parse_logical_not();
  Result<NodePtr> parse_comparison();
  Result<NodePtr> parse_binary_level(TokenType type, Result<NodePtr> (Parser::*operand)());
  Result<NodePtr> parse_additive() { return parse_binary_level(TokenType::kAdditiveBinaryOperator, &Parser::parse_multiplicative); }
  Result<NodePtr> parse_multiplicative() {
    return parse_binary_level(TokenType::kMultiplicativeBinaryOperator, &Parser::parse_power);
  }
  Result<NodePtr> parse_power() { return parse_binary_level(TokenType::kExponentiationBinaryOperator, &Parser::parse_test); }
  Result<NodePtr> parse_test();
  Result<NodePtr> parse_filter();
  Result<NodePtr> parse_unary_sign();
  Result<NodePtr> parse_call_member();
  Result<NodePtr> parse_call(NodePtr callee);
  Result<std::vector<NodePtr>> parse_args(ArgsMode mode);
  Result<std::vector<NodePtr>> parse_arguments_list(ArgsMode mode);
  Result<NodePtr> parse_member_arguments();
  Result<NodePtr> parse_member(NodePtr object);
  Result<NodePtr> parse_primary();

  const std::vector<Token>& tokens_;
  std::string_view source_;
  size_t current_ = 0;
  int depth_ = 0;
};

Result<NodePtr> Parser::parse_any() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  switch (peek().type) {
    case TokenType::kComment: {
      auto node = make(NodeKind::kComment);
      node->text = next().value;
      return node;
    }
    case TokenType::kText: {
      auto node = make(NodeKind::kText);
      node->text = next().value;
      return node;
    }
    case TokenType::kOpenStatement: return parse_statement();
    case TokenType::kOpenExpression: {
      next();
      OG_PARSE(NodePtr expression, parse_expression());
      OG_RETURN_IF_ERROR(expect(TokenType::kCloseExpression, "Expected closing expression token"));
      return expression;
    }
    default: return error(std::string("Unexpected token type: ") + token_type_name(peek().type));
  }
}

Result<NodePtr> Parser::parse_statement() {
  OG_RETURN_IF_ERROR(expect(TokenType::kOpenStatement, "Expected opening statement token"));
  if (!is(TokenType::kIdentifier)) return error(std::string("Unknown statement, got ") + token_type_name(peek().type));
  const std::string name = peek().value;
  if (name == "set") {
    next();
    return parse_set();
  }
  if (name == "if" || name == "macro" || name == "for") {
    next();
    OG_PARSE(NodePtr node, name == "if" ? parse_if() : name == "macro" ? parse_macro() : parse_for());
    OG_RETURN_IF_ERROR(expect_end("end" + name));
    return node;
  }
  if (name == "call") {
    next();
    return parse_call_statement();
  }
  if (name == "break" || name == "continue") {
    auto node = make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue);
    next();
    OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
    return node;
  }
  if (name == "filter") {
    next();
    return parse_filter_statement();
  }
  return error("Unknown statement type: " + name);
}

Result<NodePtr> Parser::parse_call_statement() {
  auto node = make(NodeKind::kCallStatement);
  if (is(TokenType::kOpenParen)) {
    OG_PARSE(node->list, parse_args(ArgsMode::kParameters));
  }
  OG_PARSE(NodePtr callee, parse_primary());
  if (callee->kind != NodeKind::kIdentifier) return error("Expected identifier following call statement");
  auto call = std::make_unique<Node>(NodeKind::kCall, callee->offset);
  OG_PARSE(call->list, parse_args(ArgsMode::kCall));
  call->a = std::move(callee);
  node->a = std::move(call);
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  OG_RETURN_IF_ERROR(parse_until({"endcall"}, node->body));
  OG_RETURN_IF_ERROR(expect_end("endcall"));
  return node;
}

Result<NodePtr> Parser::parse_filter_statement() {
  auto node = make(NodeKind::kFilterStatement);
  OG_PARSE(NodePtr filter, parse_primary());
  if (filter->kind == NodeKind::kIdentifier && is(TokenType::kOpenParen)) {
    OG_PARSE(filter, parse_call(std::move(filter)));
  }
  node->a = std::move(filter);
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  OG_RETURN_IF_ERROR(parse_until({"endfilter"}, node->body));
  OG_RETURN_IF_ERROR(expect_end("endfilter"));
  return node;
}

Result<NodePtr> Parser::parse_set() {
  auto node = make(NodeKind::kSet);
  OG_PARSE(node->a, parse_expression_sequence(false));
  if (is(TokenType::kEquals)) {
    next();
    OG_PARSE(node->b, parse_expression_sequence(false));
  } else {
    OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected %} token"));
    OG_RETURN_IF_ERROR(parse_until({"endset"}, node->body));
    OG_RETURN_IF_ERROR(expect(TokenType::kOpenStatement, "Expected {% token"));
    OG_RETURN_IF_ERROR(expect_identifier("endset"));
  }
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  return node;
}

Result<NodePtr> Parser::parse_if() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  auto node = make(NodeKind::kIf);
  OG_PARSE(node->a, parse_expression());
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  OG_RETURN_IF_ERROR(parse_until({"elif", "else", "endif"}, node->body));
  if (is_statement({"elif"})) {
    next();
    next();
    OG_PARSE(NodePtr elif, parse_if());
    node->alternate.push_back(std::move(elif));
  } else if (is_statement({"else"})) {
    next();
    next();
    OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
    OG_RETURN_IF_ERROR(parse_until({"endif"}, node->alternate));
  }
  return node;
}

Result<NodePtr> Parser::parse_macro() {
  auto node = make(NodeKind::kMacro);
  OG_PARSE(NodePtr name, parse_primary());
  if (name->kind != NodeKind::kIdentifier) return error("Expected identifier following macro statement");
  node->text = name->text;
  OG_PARSE(node->list, parse_args(ArgsMode::kParameters));
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  OG_RETURN_IF_ERROR(parse_until({"endmacro"}, node->body));
  return node;
}

Result<NodePtr> Parser::parse_expression_sequence(bool primary) {
  const auto parse_one = [&]() { return primary ? parse_primary() : parse_expression(); };
  auto tuple = make(NodeKind::kTupleLiteral);
  OG_PARSE(NodePtr first, parse_one());
  if (!is(TokenType::kComma)) return first;
  tuple->list.push_back(std::move(first));
  while (is(TokenType::kComma)) {
    next();
    OG_PARSE(NodePtr item, parse_one());
    tuple->list.push_back(std::move(item));
  }
  return tuple;
}

Result<NodePtr> Parser::parse_for() {
  auto node = make(NodeKind::kFor);
  OG_PARSE(node->a, parse_expression_sequence(true));
  if (node->a->kind != NodeKind::kIdentifier && node->a->kind != NodeKind::kTupleLiteral) {
    return error("Expected identifier/tuple for the loop variable");
  }
  if (!is_identifier("in")) return error("Expected `in` keyword following loop variable");
  next();
  OG_PARSE(node->b, parse_expression());
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
  OG_RETURN_IF_ERROR(parse_until({"endfor", "else"}, node->body));
  if (is_statement({"else"})) {
    next();
    next();
    OG_RETURN_IF_ERROR(expect(TokenType::kCloseStatement, "Expected closing statement token"));
    OG_RETURN_IF_ERROR(parse_until({"endfor"}, node->alternate));
  }
  return node;
}

// `a if c else b` and `a if c` (a select, undefined when c is false).
Result<NodePtr> Parser::parse_expression() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  OG_PARSE(NodePtr value, parse_logical_or());
  if (!is_identifier("if")) return value;
  auto node = make(NodeKind::kSelect);
  next();
  OG_PARSE(NodePtr condition, parse_logical_or());
  if (!is_identifier("else")) {
    node->a = std::move(value);
    node->b = std::move(condition);
    return node;
  }
  next();
  node->kind = NodeKind::kTernary;
  node->a = std::move(condition);
  node->b = std::move(value);
  OG_PARSE(node->c, parse_expression());
  return node;
}

Result<NodePtr> Parser::parse_logical_or() {
  OG_PARSE(NodePtr left, parse_logical_and());
  while (is_identifier("or")) {
    auto node = make(NodeKind::kBinary);
    node->text = next().value;
    OG_PARSE(node->b, parse_logical_and());
    node->a = std::move(left);
    left = std::move(node);
  }
  return left;
}

Result<NodePtr> Parser::parse_logical_and() {
  OG_PARSE(NodePtr left, parse_logical_not());
  while (is_identifier("and")) {
    auto node = make(NodeKind::kBinary);
    node->text = next().value;
    OG_PARSE(node->b, parse_logical_not());
    node->a = std::move(left);
    left = std::move(node);
  }
  return left;
}

Result<NodePtr> Parser::parse_logical_not() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  // As in the reference, a `not` left over after the operand replaces what was parsed so far.
  NodePtr negation;
  while (is_identifier("not")) {
    negation = make(NodeKind::kUnary);
    negation->text = next().value;
    OG_PARSE(negation->a, parse_logical_not());
  }
  if (negation) return negation;
  return parse_comparison();
}

Result<NodePtr> Parser::parse_comparison() {
  OG_PARSE(NodePtr left, parse_additive());
  while (true) {
    auto node = make(NodeKind::kBinary);
    if (is_identifier("not") && is_identifier("in", 1)) {
      node->text = "not in";
      next();
      next();
    } else if (is_identifier("in") || is(TokenType::kComparisonBinaryOperator)) {
      node->text = next().value;
    } else {
      return left;
    }
    OG_PARSE(node->b, parse_additive());
    node->a = std::move(left);
    left = std::move(node);
  }
}

Result<NodePtr> Parser::parse_binary_level(TokenType type, Result<NodePtr> (Parser::*operand)()) {
  OG_PARSE(NodePtr left, (this->*operand)());
  while (is(type)) {
    auto node = make(NodeKind::kBinary);
    node->text = next().value;
    OG_PARSE(node->b, (this->*operand)());
    node->a = std::move(left);
    left = std::move(node);
  }
  return left;
}

Result<NodePtr> Parser::parse_test() {
  OG_PARSE(NodePtr operand, parse_filter());
  while (is_identifier("is")) {
    auto node = make(NodeKind::kTest);
    next();
    node->negate = is_identifier("not");
    if (node->negate) next();
    OG_PARSE(NodePtr test, parse_primary());
    if (test->kind != NodeKind::kIdentifier) return error("Expected identifier for the test");
    node->text = test->text;
    node->a = std::move(operand);
    operand = std::move(node);
  }
  return operand;
}

Result<NodePtr> Parser::parse_filter() {
  OG_PARSE(NodePtr operand, parse_unary_sign());
  while (is(TokenType::kPipe)) {
    auto node = make(NodeKind::kFilter);
    next();
    OG_PARSE(NodePtr filter, parse_primary());
    if (filter->kind != NodeKind::kIdentifier) return error("Expected identifier for the filter");
    if (is(TokenType::kOpenParen)) {
      OG_PARSE(filter, parse_call(std::move(filter)));
    }
    node->a = std::move(operand);
    node->b = std::move(filter);
    operand = std::move(node);
  }
  return operand;
}

Result<NodePtr> Parser::parse_unary_sign() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  const Token& token = peek();
  if ((token.type == TokenType::kUnaryOperator || token.type == TokenType::kAdditiveBinaryOperator) &&
      (token.value == "-" || token.value == "+")) {
    auto node = make(NodeKind::kUnary);
    node->text = next().value;
    OG_PARSE(node->a, parse_unary_sign());
    return node;
  }
  return parse_call_member();
}

Result<NodePtr> Parser::parse_call_member() {
  OG_PARSE(NodePtr primary, parse_primary());
  OG_PARSE(NodePtr member, parse_member(std::move(primary)));
  if (is(TokenType::kOpenParen)) return parse_call(std::move(member));
  return member;
}

Result<NodePtr> Parser::parse_call(NodePtr callee) {
  // Iterative form of the reference's recursion on f(a)(b).x(c).
  while (true) {
    auto call = make(NodeKind::kCall);
    call->offset = callee->offset;
    OG_PARSE(call->list, parse_args(ArgsMode::kCall));
    call->a = std::move(callee);
    OG_PARSE(callee, parse_member(std::move(call)));
    if (!is(TokenType::kOpenParen)) return callee;
  }
}

Result<std::vector<NodePtr>> Parser::parse_args(ArgsMode mode) {
  OG_RETURN_IF_ERROR(expect(TokenType::kOpenParen, "Expected opening parenthesis for arguments list"));
  OG_PARSE(std::vector<NodePtr> args, parse_arguments_list(mode));
  OG_RETURN_IF_ERROR(expect(TokenType::kCloseParen, "Expected closing parenthesis for arguments list"));
  return args;
}

Result<std::vector<NodePtr>> Parser::parse_arguments_list(ArgsMode mode) {
  std::vector<NodePtr> args;
  std::set<std::string> parameter_names;
  bool saw_keyword = false, saw_spread = false;
  while (!is(TokenType::kCloseParen)) {
    const bool keyword_spread = is(TokenType::kExponentiationBinaryOperator);
    const bool positional_spread = is(TokenType::kMultiplicativeBinaryOperator) && peek().value == "*";
    if (mode == ArgsMode::kParameters && (keyword_spread || positional_spread)) {
      return error("Argument unpacking is not allowed in parameter declarations");
    }
    if (keyword_spread) {
      auto node = make(NodeKind::kKeywordSpread);
      next();
      OG_PARSE(node->a, parse_expression());
      args.push_back(std::move(node));
      if (is(TokenType::kComma)) next();
      if (!is(TokenType::kCloseParen)) return error("Expected closing parenthesis: `**` must be applied to the final argument");
      break;
    }
    NodePtr argument;
    if (positional_spread) {
      if (saw_spread) return error("Only one `*` argument unpacking is allowed");
      saw_spread = true;
      argument = make(NodeKind::kSpread);
      next();
      OG_PARSE(argument->a, parse_expression());
    } else {
      OG_PARSE(argument, parse_expression());
      if (is(TokenType::kEquals)) {
        next();
        if (argument->kind != NodeKind::kIdentifier) {
          return error(mode == ArgsMode::kParameters ? "Expected identifier for parameter declaration"
                                                     : "Expected identifier for keyword argument");
        }
        auto keyword = std::make_unique<Node>(NodeKind::kKeywordArgument, argument->offset);
        keyword->text = argument->text;
        OG_PARSE(keyword->a, parse_expression());
        argument = std::move(keyword);
      }
      if (mode == ArgsMode::kParameters) {
        if (argument->kind != NodeKind::kIdentifier && argument->kind != NodeKind::kKeywordArgument) {
          return error("Expected identifier for parameter declaration");
        }
        if (!parameter_names.insert(argument->text).second) return error("Duplicate parameter name: " + argument->text);
      }
      if (argument->kind == NodeKind::kKeywordArgument) {
        saw_keyword = true;
      } else if (saw_keyword) {
        return error(mode == ArgsMode::kCall ? "Positional arguments must come before keyword arguments"
                                             : "Non-default argument follows default argument");
      } else if (saw_spread) {
        return error("Positional arguments must not follow `*` argument unpacking");
      }
    }
    args.push_back(std::move(argument));
    if (is(TokenType::kComma)) next();
  }
  return args;
}

// Inside [ ]: an index, or a slice start:stop:step with any part omitted.
Result<NodePtr> Parser::parse_member_arguments() {
  std::vector<NodePtr> slices;
  bool is_slice = false;
  const uint32_t offset = peek().offset;
  while (!is(TokenType::kCloseSquareBracket)) {
    if (is(TokenType::kColon)) {
      slices.push_back(nullptr);
      next();
      is_slice = true;
    } else {
      OG_PARSE(NodePtr part, parse_expression());
      slices.push_back(std::move(part));
      if (is(TokenType::kColon)) {
        next();
        is_slice = true;
      }
    }
  }
  if (slices.empty()) return error("Expected at least one argument for member/slice expression");
  if (!is_slice) return std::move(slices[0]);
  if (slices.size() > 3) return error("Expected 0-3 arguments for slice expression");
  auto slice = std::make_unique<Node>(NodeKind::kSlice, offset);
  slice->a = std::move(slices[0]);
  if (slices.size() > 1) slice->b = std::move(slices[1]);
  if (slices.size() > 2) slice->c = std::move(slices[2]);
  return slice;
}

Result<NodePtr> Parser::parse_member(NodePtr object) {
  while (is(TokenType::kDot) || is(TokenType::kOpenSquareBracket)) {
    auto node = make(NodeKind::kMember);
    node->computed = next().type == TokenType::kOpenSquareBracket;
    if (node->computed) {
      OG_PARSE(node->b, parse_member_arguments());
      OG_RETURN_IF_ERROR(expect(TokenType::kCloseSquareBracket, "Expected closing square bracket"));
    } else {
      OG_PARSE(node->b, parse_primary());
      if (node->b->kind != NodeKind::kIdentifier && node->b->kind != NodeKind::kIntegerLiteral) {
        return error("Expected identifier or integer following dot operator");
      }
    }
    node->offset = object->offset;
    node->a = std::move(object);
    object = std::move(node);
  }
  return object;
}

Result<NodePtr> Parser::parse_primary() {
  DepthGuard guard(depth_);
  OG_RETURN_IF_ERROR(check_depth());
  const uint32_t offset = peek().offset;
  const Token& token = peek();
  switch (token.type) {
    case TokenType::kNumericLiteral: {
      const bool is_float = token.value.find('.') != std::string::npos;
      auto node = std::make_unique<Node>(is_float ? NodeKind::kFloatLiteral : NodeKind::kIntegerLiteral, offset);
      node->number = std::strtod(next().value.c_str(), nullptr);
      return node;
    }
    case TokenType::kStringLiteral: {
      auto node = std::make_unique<Node>(NodeKind::kStringLiteral, offset);
      node->text = next().value;
      while (is(TokenType::kStringLiteral)) node->text += next().value;
      return node;
    }
    case TokenType::kIdentifier: {
      auto node = std::make_unique<Node>(NodeKind::kIdentifier, offset);
      node->text = next().value;
      return node;
    }
    case TokenType::kOpenParen: {
      next();
      OG_PARSE(NodePtr expression, parse_expression_sequence(false));
      OG_RETURN_IF_ERROR(expect(TokenType::kCloseParen, "Expected closing parenthesis"));
      return expression;
    }
    case TokenType::kOpenSquareBracket: {
      next();
      auto node = std::make_unique<Node>(NodeKind::kArrayLiteral, offset);
      while (!is(TokenType::kCloseSquareBracket)) {
        OG_PARSE(NodePtr item, parse_expression());
        node->list.push_back(std::move(item));
        if (is(TokenType::kComma)) next();
      }
      next();
      return node;
    }
    case TokenType::kOpenCurlyBracket: {
      next();
      auto node = std::make_unique<Node>(NodeKind::kObjectLiteral, offset);
      while (!is(TokenType::kCloseCurlyBracket)) {
        OG_PARSE(NodePtr key, parse_expression());
        OG_RETURN_IF_ERROR(expect(TokenType::kColon, "Expected colon between key and value in object literal"));
        OG_PARSE(NodePtr value, parse_expression());
        node->pairs.emplace_back(std::move(key), std::move(value));
        if (is(TokenType::kComma)) next();
      }
      next();
      return node;
    }
    default: return error(std::string("Unexpected token: ") + token_type_name(token.type));
  }
}

#undef OG_PARSE

}  // namespace

Result<NodePtr> parse(const std::vector<Token>& tokens, std::string_view source) {
  return Parser(tokens, source).parse_program();
}

}  // namespace onnx_genai::chat_template
