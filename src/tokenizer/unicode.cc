#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_tables.h"

namespace onnx_genai::unicode {
namespace tables = unicode_tables;

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or the length of its maximal ill-formed
// subpart as a negative number (Unicode 3.9, "U+FFFD substitution of maximal subparts").
int sequence_at(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return -k;
    const auto b = static_cast<uint8_t>(s[i + k]);
    if (b < lo || b > hi) return -k;
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII runs are the common case; skip them eight bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t word;
      __builtin_memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const int n = sequence_at(s, i);
    if (n < 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string decode_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const int n = sequence_at(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += -n;
    }
  }
  return out;
}

// ---- Normalization ------------------------------------------------------------------------

namespace {

constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161,
                   kHangulTBase = 0x11A7;
constexpr int kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28,
              kHangulNCount = kHangulVCount * kHangulTCount,
              kHangulSCount = kHangulLCount * kHangulNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const uint32_t* begin = tables::kCombiningClass;
  const uint32_t* end = begin + tables::kCombiningClass_size;
  const uint32_t* it = std::lower_bound(begin, end, static_cast<uint32_t>(cp) << 8);
  return (it != end && (*it >> 8) == cp) ? static_cast<uint8_t>(*it & 0xFF) : 0;
}

void decompose_into(char32_t cp, bool compat, std::vector<char32_t>& out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    const int s = static_cast<int>(cp - kHangulSBase);
    out.push_back(kHangulLBase + s / kHangulNCount);
    out.push_back(kHangulVBase + (s % kHangulNCount) / kHangulTCount);
    if (s % kHangulTCount != 0) out.push_back(kHangulTBase + s % kHangulTCount);
    return;
  }
  if (cp >= 0xA0) {
    const uint32_t* begin = tables::kDecompKeys;
    const uint32_t* end = begin + tables::kDecompKeys_size;
    const uint32_t* it = std::lower_bound(
        begin, end, static_cast<uint32_t>(cp),
        [](uint32_t key, uint32_t value) { return (key & 0x7FFFFFFF) < value; });
    if (it != end && (*it & 0x7FFFFFFF) == cp && (compat || !(*it & 0x80000000))) {
      const uint32_t entry = tables::kDecompOffsets[it - begin];
      const uint32_t offset = entry & 0xFFFFFF, length = entry >> 24;
      for (uint32_t k = 0; k < length; ++k) decompose_into(tables::kDecompPool[offset + k], compat, out);
      return;
    }
  }
  out.push_back(cp);
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kHangulLBase && a < kHangulLBase + kHangulLCount && b >= kHangulVBase &&
      b < kHangulVBase + kHangulVCount) {
    return kHangulSBase + ((a - kHangulLBase) * kHangulVCount + (b - kHangulVBase)) * kHangulTCount;
  }
  if (a >= kHangulSBase && a < kHangulSBase + kHangulSCount && (a - kHangulSBase) % kHangulTCount == 0 &&
      b > kHangulTBase && b < kHangulTBase + kHangulTCount) {
    return a + (b - kHangulTBase);
  }
  size_t lo = 0, hi = tables::kCompositions_size / 3;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t* t = tables::kCompositions + 3 * mid;
    if (t[0] < a || (t[0] == a && t[1] < b)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const uint32_t* t = tables::kCompositions + 3 * lo;
  return (lo < tables::kCompositions_size / 3 && t[0] == a && t[1] == b) ? t[2] : 0;
}

bool in_ranges(const uint32_t* ranges, size_t size, char32_t cp) {
  const uint32_t* it = std::upper_bound(ranges, ranges + size, (static_cast<uint32_t>(cp) << 1) | 1);
  return (*(it - 1) & 1) != 0;
}

// Canonical ordering: stable sort of each run of non-starters by combining class.
void reorder(std::vector<char32_t>& cps) {
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

// Canonical composition (UAX #15, section 1.3), in place.
void compose(std::vector<char32_t>& cps) {
  if (cps.empty()) return;
  size_t starter = 0, out = 1;
  int last_class = combining_class(cps[0]) ? 256 : 0;
  for (size_t i = 1; i < cps.size(); ++i) {
    const char32_t ch = cps[i];
    const int ch_class = combining_class(ch);
    const char32_t composite = compose_pair(cps[starter], ch);
    if (composite != 0 && (last_class < ch_class || last_class == 0)) {
      cps[starter] = composite;
      continue;
    }
    if (ch_class == 0) starter = out;
    last_class = ch_class;
    cps[out++] = ch;
  }
  cps.resize(out);
}

}  // namespace

std::string normalize(std::string_view s, Form form) {
  const bool compat = form == Form::kNFKC || form == Form::kNFKD;
  const bool composed = form == Form::kNFC || form == Form::kNFKC;
  if (composed) {
    const uint32_t* ranges = compat ? tables::kNfkcUnstableRanges : tables::kNfcUnstableRanges;
    const size_t size = compat ? tables::kNfkcUnstableRanges_size : tables::kNfcUnstableRanges_size;
    bool stable = true;
    for (size_t i = 0; i < s.size() && stable;) {
      if (static_cast<uint8_t>(s[i]) < 0x80) {
        ++i;
        continue;
      }
      stable = !in_ranges(ranges, size, next_code_point(s, i));
    }
    if (stable) return std::string(s);
  }
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose_into(next_code_point(s, i), compat, cps);
  reorder(cps);
  if (composed) compose(cps);
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

// ---- Case and categories ------------------------------------------------------------------

Category category(char32_t cp) {
  const uint32_t* begin = tables::kCategoryRanges;
  const uint32_t* it = std::upper_bound(begin, begin + tables::kCategoryRanges_size,
                                        (static_cast<uint32_t>(cp) << 8) | 0xFF);
  return static_cast<Category>(*(it - 1) & 0xFF);
}

namespace {

bool is_cased_letter(char32_t cp) {
  const Category c = category(cp);
  return c == Category::Lu || c == Category::Ll || c == Category::Lt;
}

// Final sigma (Unicode SpecialCasing): a capital sigma preceded by a cased letter and not
// followed by one lowercases to U+03C2. Marks between are skipped (case-ignorable).
bool is_final_sigma(std::string_view s, size_t start, size_t end) {
  bool cased_before = false;
  for (size_t i = start; i > 0;) {
    size_t j = i - 1;
    while (j > 0 && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80) --j;
    size_t k = j;
    const char32_t cp = next_code_point(s, k);
    i = j;
    if (is_mark(cp)) continue;
    cased_before = is_cased_letter(cp);
    break;
  }
  if (!cased_before) return false;
  for (size_t i = end; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    if (is_mark(cp)) continue;
    return !is_cased_letter(cp);
  }
  return true;
}

}  // namespace

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++i;
      continue;
    }
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    if (cp == 0x3A3 && is_final_sigma(s, start, i)) {
      append_utf8(out, 0x3C2);
      continue;
    }
    const uint32_t* begin = tables::kLowerKeys;
    const uint32_t* end = begin + tables::kLowerKeys_size;
    const uint32_t* it = std::lower_bound(begin, end, static_cast<uint32_t>(cp));
    if (it == end || *it != cp) {
      append_utf8(out, cp);
      continue;
    }
    const uint32_t entry = tables::kLowerOffsets[it - begin];
    for (uint32_t k = 0; k < (entry >> 24); ++k) append_utf8(out, tables::kLowerPool[(entry & 0xFFFFFF) + k]);
  }
  return out;
}

bool is_white_space(char32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_js_space(char32_t cp) { return (is_white_space(cp) && cp != 0x85) || cp == 0xFEFF; }

}  // namespace onnx_genai::unicode
