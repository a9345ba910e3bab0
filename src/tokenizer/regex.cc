#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state: match data (only the whole-match pair is read) and a JIT stack big
// enough for 100k-character whitespace runs.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = [this] {
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(ctx, nullptr, stack);
    return ctx;
  }();
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char other_case(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : static_cast<char>(c + 32); }

// Replacement for a shorthand escape `\c` outside (in_class=false) or inside a class body.
// Empty when PCRE2's meaning already matches (or, in a class, when it cannot be written).
std::string shorthand(char c, bool in_class) {
  static const std::string word = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
  static const std::string word_extra = "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
  switch (c) {
    case 's': return in_class ? kWhiteSpaceClass : std::string("[") + kWhiteSpaceClass + "]";
    case 'S': return in_class ? "" : std::string("[^") + kWhiteSpaceClass + "]";
    case 'd': return "\\p{Nd}";
    case 'D': return "\\P{Nd}";
    case 'w': return in_class ? word : "[" + word + word_extra + "]";
    case 'W': return in_class ? "" : "[^" + word + word_extra + "]";
    case 'h': return in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
    case 'H': return in_class ? "" : "[^0-9A-Fa-f]";
    default: return "";
  }
}

// Copies an escape that is the same in both dialects apart from spelling: \uXXXX becomes
// \x{XXXX}; \p{..}, \P{..} and \x{..} pass through. Returns false (leaving `i`) for any other
// escape; on true, `i` is past the escape.
Result<bool> copy_braced_escape(std::string_view p, size_t& i, std::string& out) {
  const char e = p[i + 1];
  if (e == 'u' && i + 5 < p.size()) {
    out += "\\x{" + std::string(p.substr(i + 2, 4)) + "}";
    i += 6;
    return true;
  }
  if ((e == 'p' || e == 'P' || e == 'x') && i + 2 < p.size() && p[i + 2] == '{') {
    const size_t close = p.find('}', i);
    if (close == std::string_view::npos) return OG_ERROR("unterminated \\", e, "{ at offset ", i);
    out += p.substr(i, close + 1 - i);
    i = close + 1;
    return true;
  }
  return false;
}

// Translates the body of a character class starting after '['; returns the index after ']'.
Result<size_t> translate_class(std::string_view p, size_t i, bool fold, std::string& out) {
  out += '[';
  if (i < p.size() && p[i] == '^') out += p[i++];
  if (i < p.size() && p[i] == ']') out += "\\]", ++i;
  std::string folded;  // other-case letters to append inside (?i:)
  while (i < p.size() && p[i] != ']') {
    const char c = p[i];
    if (c == '[') {  // nested class (Oniguruma union)
      OG_ASSIGN_OR_RETURN(i, translate_class(p, i + 1, fold, out));
      continue;
    }
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      OG_ASSIGN_OR_RETURN(bool braced, copy_braced_escape(p, i, out));
      if (braced) continue;
      std::string rewrite = shorthand(e, true);
      if (!rewrite.empty()) {
        out += rewrite;
      } else if (e == 'S' || e == 'W' || e == 'H') {
        return OG_ERROR("negated shorthand \\", e, " inside a character class is not supported");
      } else {
        out += p.substr(i, 2);
      }
      i += 2;
      continue;
    }
    if (fold && is_ascii_letter(c)) {
      if (i + 2 < p.size() && p[i + 1] == '-' && is_ascii_letter(p[i + 2])) {
        folded += other_case(c);
        folded += '-';
        folded += other_case(p[i + 2]);
        out += p.substr(i, 3);
        i += 3;
        continue;
      }
      folded += other_case(c);
    }
    out += c;
    ++i;
  }
  if (i >= p.size()) return OG_ERROR("unterminated character class");
  out += folded;
  out += ']';
  return i + 1;
}

}  // namespace

Result<std::string> translate_oniguruma(std::string_view p) {
  std::string out;
  std::vector<bool> fold_stack;  // per open group: the fold state to restore at ')'
  bool fold = false;
  bool after_quantifier = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      after_quantifier = false;
      OG_ASSIGN_OR_RETURN(bool braced, copy_braced_escape(p, i, out));
      if (braced) continue;
      std::string rewrite = shorthand(e, false);
      out += rewrite.empty() ? std::string(p.substr(i, 2)) : rewrite;
      i += 2;
      continue;
    }
    switch (c) {
      case '[': {
        OG_ASSIGN_OR_RETURN(i, translate_class(p, i + 1, fold, out));
        after_quantifier = false;
        continue;
      }
      case '(': {
        fold_stack.push_back(fold);
        if (p.substr(i, 4) == "(?i:") {
          fold = true;
          out += "(?:";
          i += 4;
        } else if (p.substr(i, 3) == "(?>") {
          out += "(?:";
          i += 3;
        } else {
          out += c;
          ++i;
        }
        after_quantifier = false;
        continue;
      }
      case ')':
        if (fold_stack.empty()) return OG_ERROR("unbalanced ')' at offset ", i);
        fold = fold_stack.back();
        fold_stack.pop_back();
        out += c;
        ++i;
        after_quantifier = false;
        continue;
      case '+':
        if (after_quantifier) {  // possessive: JavaScript has none, so it matches greedily
          ++i;
          after_quantifier = false;
          continue;
        }
        [[fallthrough]];
      case '*':
      case '?':
        out += c;
        ++i;
        after_quantifier = c != '?' || !after_quantifier;
        continue;
      case '{': {
        // A counted quantifier {n}, {n,}, {n,m}; any other brace is a literal.
        size_t end = i + 1;
        while (end < p.size() && ((p[end] >= '0' && p[end] <= '9') || p[end] == ',')) ++end;
        if (end < p.size() && p[end] == '}' && end > i + 1) {
          out += p.substr(i, end + 1 - i);
          i = end + 1;
          after_quantifier = true;
        } else {
          out += "\\{";
          ++i;
          after_quantifier = false;
        }
        continue;
      }
      default:
        if (fold && is_ascii_letter(c)) {
          out += '[';
          out += c;
          out += other_case(c);
          out += ']';
        } else {
          out += c;
        }
        ++i;
        after_quantifier = false;
        continue;
    }
  }
  if (!fold_stack.empty()) return OG_ERROR("unbalanced '(' in pattern");
  return out;
}

Result<Regex> Regex::compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    return OG_ERROR("bad regex '", pattern, "' at offset ", offset, ": ", pcre2_message(error));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex regex;
  regex.code_ = std::move(holder);
  regex.pattern_ = std::string(pattern);
  return regex;
}

Result<Regex> Regex::compile_oniguruma(std::string_view pattern) {
  auto translated = translate_oniguruma(pattern);
  if (!translated) return translated.status().with_context("regex '" + std::string(pattern) + "'");
  return compile(*translated);
}

Result<Regex> Regex::literal(std::string_view text) {
  std::string pattern = "\\Q";
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 2) == "\\E") {
      pattern += "\\E\\\\E\\Q";
      ++i;
    } else {
      pattern += text[i];
    }
  }
  pattern += "\\E";
  return compile(pattern);
}

Status Regex::find_all(std::string_view text, std::vector<Match>& matches) const {
  MatchState& state = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), start, 0, state.data, state.context)
                              : pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                            state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return OG_ERROR("regex '", pattern_, "': ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    matches.push_back({ovector[0], ovector[1]});
    if (ovector[1] > ovector[0]) {
      start = ovector[1];
    } else if (ovector[1] < text.size()) {
      start = ovector[1] + unicode::sequence_length(static_cast<uint8_t>(text[ovector[1]]));
    } else {
      break;
    }
  }
  return Status::ok();
}

}  // namespace onnx_genai::tokenizer
