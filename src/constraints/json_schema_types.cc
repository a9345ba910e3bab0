// The keywords of each instance type: strings (lengths, pattern, format), numbers and integers
// (bounds, multipleOf), arrays (items, prefixItems, additionalItems, item counts, uniqueItems)
// and objects (properties, required, additionalProperties).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <numeric>

#include "constraints/json_schema_compiler.h"
#include "constraints/regex_compiler.h"
#include "constraints/regular_product.h"

namespace onnx_genai::constraints {
namespace {

using R = GrammarBuilder;

// Formats as full-match regexes over the decoded string. Each accepts only valid values (dates
// with the month's day count and leap years, no leap seconds), so a generated value passes a
// strict format checker; some valid rarities (leap seconds, quoted e-mail local parts) are left out.
const char* format_regex(const std::string& format) {
  // Years whose February has 29 days: divisible by 4, and not by 100 unless by 400.
#define OG_LEAP "(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29"
#define OG_DATE "(\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)|02-(0[1-9]|1\\d|2[0-8]))|" OG_LEAP ")"
#define OG_TIME "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?([zZ]|[+-]([01]\\d|2[0-3]):[0-5]\\d)"
  if (format == "date") return OG_DATE;
  if (format == "time") return OG_TIME;
  if (format == "date-time") return OG_DATE "[tT]" OG_TIME;
  if (format == "email") {
    return "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
           "@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*";
  }
  if (format == "uuid") return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  if (format == "uri") return "[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~!$&'()*+,;=:@/?#-]|%[0-9A-Fa-f]{2})*";
#undef OG_LEAP
#undef OG_DATE
#undef OG_TIME
  return nullptr;
}


// multipleOf as step / 10^fraction_digits with both integers, read from the shortest decimal
// that gives back the schema's double (what its text most likely spelled).
struct DecimalStep {
  uint64_t step = 1;
  int fraction_digits = 0;
  // Digits allowed before the point: a float multipleOf is applied by validators in floating
  // point, exact only while the multiples stay well inside a double's 53 bits.
  int max_integer_digits = 0;
};

// Grammar states a multipleOf may take: its remainders times the fraction digits it tracks.
constexpr uint64_t kMaxMultipleStates = 20000;

Result<DecimalStep> decimal_step(const OrderedJson& value, const std::string& pointer) {
  if (!value.is_number() || !(value.get<double>() > 0)) {
    return OG_ERROR("json schema: \"multipleOf\" must be a number above 0 at ", shown(pointer));
  }
  const std::string text = value.dump();
  const size_t e = text.find_first_of("eE");
  const std::string mantissa = text.substr(0, e);
  int fraction_digits = e == std::string::npos ? 0 : -std::stoi(text.substr(e + 1));
  std::string digits;
  if (const size_t dot = mantissa.find('.'); dot != std::string::npos) {
    fraction_digits += static_cast<int>(mantissa.size() - dot - 1);
    digits = mantissa.substr(0, dot) + mantissa.substr(dot + 1);
  } else {
    digits = mantissa;
  }
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  while (fraction_digits > 0 && digits.size() > 1 && digits.back() == '0') digits.pop_back(), --fraction_digits;
  for (; fraction_digits < 0; ++fraction_digits) digits += '0';
  const auto too_large = [&] {
    return OG_ERROR("json schema: unsupported keyword \"multipleOf\" ", text, " (more than ", kMaxMultipleStates,
                    " grammar states) at ", shown(pointer));
  };
  if (digits.empty() || digits.size() > 9 || fraction_digits > 9) return too_large();
  DecimalStep out{std::stoull(digits), fraction_digits, value.is_number_float() ? 12 : 0};
  // Validators divide by a float step in floating point: for a step that is no binary fraction
  // (0.1) they disagree with exact decimal multiples (0.3 / 0.1 != 3), so such steps are refused.
  uint64_t denominator = 1;
  for (int k = 0; k < out.fraction_digits; ++k) denominator *= 10;
  denominator /= std::gcd(out.step, denominator);
  if ((denominator & (denominator - 1)) != 0) {
    return OG_ERROR("json schema: unsupported keyword \"multipleOf\" ", text,
                    " (not a binary fraction: floating-point validators disagree on its multiples) at ", shown(pointer));
  }
  const uint64_t states = out.step * static_cast<uint64_t>(out.fraction_digits + 1 + std::max(out.max_integer_digits, 1));
  if (states > kMaxMultipleStates) return too_large();
  return out;
}

// Validators compare a number as its parsed double (an integer exactly) with the bound's value.
// The grammar holds numbers to a double instead, inclusive: the bound itself, or for an exclusive
// bound the next double inward (a number at or past that double parses at or past it, and so
// strictly past the bound), or for an integer past 2^53, which a double may round either way,
// the next double inward of its rounding. `inward` is +inf for a lower bound, -inf for an upper.
double inner_bound(const OrderedJson& bound, bool exclusive, double inward) {
  const double d = bound.get<double>();
  const bool rounded_integer = !bound.is_number_float() && std::fabs(d) >= 9007199254740992.0;
  return exclusive || rounded_integer ? std::nextafter(d, inward) : d;
}

// A double bound as a decimal the grammar compares exactly: the shortest decimal that reads back
// as the double (0.1 for the double nearest 0.1, as the schema most likely spelled it), whose
// every number on the inside also reads back on the inside (rounding is monotonic); an integral
// double as its exact integer (past 2^53 the shortest text is not the value, and integers compare
// exactly).
JsonGrammar::Decimal decimal_of(double d) {
  char text[512];  // the longest fixed text of a double: 309 integer digits, or 17 digits past 324 zeros
  const std::to_chars_result r = d == std::floor(d) ? std::to_chars(text, text + sizeof text, d, std::chars_format::fixed, 0)
                                                    : std::to_chars(text, text + sizeof text, d, std::chars_format::fixed);
  std::string s(text, r.ptr);
  JsonGrammar::Decimal out;
  out.negative = d < 0;
  if (s[0] == '-') s.erase(0, 1);
  const size_t dot = s.find('.');
  out.integer = s.substr(0, dot);
  if (dot != std::string::npos) out.fraction = s.substr(dot + 1);
  while (!out.fraction.empty() && out.fraction.back() == '0') out.fraction.pop_back();
  return out;
}

bool has_number_bounds(const OrderedJson& schema) {
  return schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
         schema.contains("exclusiveMaximum");
}

}  // namespace

Result<int64_t> count_keyword(const OrderedJson& schema, const char* key, const std::string& pointer) {
  auto it = schema.find(key);
  if (it == schema.end()) return int64_t{-1};
  const bool integral = it->is_number_unsigned() ||
                        (it->is_number_float() && it->get<double>() >= 0 && it->get<double>() == std::floor(it->get<double>()));
  if (!integral) return OG_ERROR("json schema: \"", key, "\" must be a non-negative integer at ", shown(pointer));
  const double value = it->get<double>();
  if (value > static_cast<double>(kMaxRepeat)) {
    return OG_ERROR("json schema: unsupported keyword \"", key, "\" above ", kMaxRepeat, " at ", shown(pointer));
  }
  return static_cast<int64_t>(value);
}

std::string length_regex(int64_t min, int64_t max) {
  return ".{" + std::to_string(std::max<int64_t>(min, 0)) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
}

Result<Symbol> SchemaCompiler::compile_type(const std::string& type, const OrderedJson& schema, const std::string& pointer,
                                            int depth) {
  if (type == "null") return R::ref(g_.literal("null"));
  if (type == "boolean") return R::ref(g_.choice("boolean", {R::ref(g_.literal("true")), R::ref(g_.literal("false"))}));
  if (type == "number") return compile_number(schema, pointer);
  if (type == kNonInteger) {
    if (has_number_bounds(schema) || schema.contains("multipleOf")) {
      return OG_ERROR("json schema: unsupported keyword \"not\" {\"type\": \"integer\"} next to number bounds or multipleOf at ",
                      shown(pointer));
    }
    return json_.non_integer();
  }
  if (type == "integer") return compile_integer(schema, pointer);
  if (type == "string") return compile_string(schema, pointer);
  if (type == "array") return compile_array(schema, pointer, depth);
  return compile_object(schema, pointer, depth);
}

Result<Symbol> SchemaCompiler::compile_string(const OrderedJson& schema, const std::string& pointer) {
  OG_ASSIGN_OR_RETURN(const int64_t min, count_keyword(schema, "minLength", pointer));
  OG_ASSIGN_OR_RETURN(const int64_t max, count_keyword(schema, "maxLength", pointer));
  // The regular conditions on the string's characters: pattern (searched), format (whole) and
  // lengths; one is a regex rule, several their product.
  std::vector<std::pair<std::string, RegexOptions>> terms;
  if (auto it = schema.find("pattern"); it != schema.end()) {
    if (!it->is_string()) return OG_ERROR("json schema: \"pattern\" must be a string at ", shown(pointer));
    terms.emplace_back(it->get<std::string>(), RegexOptions{TextEncoding::kJsonString, /*search=*/true});
  }
  if (auto it = schema.find("format"); it != schema.end()) {
    const std::string format = it->is_string() ? it->get<std::string>() : it->dump();
    const char* regex = format_regex(format);
    if (regex == nullptr) return OG_ERROR("json schema: unsupported keyword \"format\" \"", format, "\" at ", shown(pointer));
    terms.emplace_back(regex, RegexOptions{TextEncoding::kJsonString, /*search=*/false});
  }
  if (terms.empty()) return json_.string(std::max<int64_t>(min, 0), max);
  if (min >= 0 || max >= 0) {
    RegexOptions any_character{TextEncoding::kJsonString};
    any_character.dot_all = true;
    terms.emplace_back(length_regex(min, max), any_character);
  }
  // A Result is never built from an ok Status (it asserts), so the body comes from one call.
  const auto conditions = [&]() -> Result<int32_t> {
    if (terms.size() == 1) return add_regex(g_, terms[0].first, terms[0].second);
    RegularProduct all;
    for (const auto& [regex, options] : terms) OG_RETURN_IF_ERROR(all.add(regex, options));
    return all.build(g_, "string conditions");
  };
  const Result<int32_t> body = conditions();
  if (!body) return body.status().with_context("json schema: \"pattern\" at " + shown(pointer));
  const int32_t rule = g_.new_rule("pattern string");
  g_.add_alt(rule, {g_.byte('"'), R::ref(*body), g_.byte('"')});
  return R::ref(rule);
}

Result<Symbol> SchemaCompiler::compile_multiple_of(const OrderedJson& schema, const std::string& pointer, bool integers) {
  if (has_number_bounds(schema)) return OG_ERROR("json schema: unsupported keyword \"multipleOf\" next to ", integers ? "integer" : "number", " bounds at ", shown(pointer));
  OG_ASSIGN_OR_RETURN(const DecimalStep m, decimal_step(schema["multipleOf"], pointer));
  if (!integers) return json_.multiple_of(m.step, m.fraction_digits, m.max_integer_digits);
  // An integer x is a multiple of step / 10^f when x * 10^f is one of step, that is when x is one
  // of step / gcd(step, 10^f).
  uint64_t step = m.step;
  for (int k = 0; k < m.fraction_digits; ++k) step /= std::gcd(step, uint64_t{10});
  return json_.multiple_of(step, 0, m.max_integer_digits);
}

Result<Symbol> SchemaCompiler::compile_number(const OrderedJson& schema, const std::string& pointer) {
  if (schema.contains("multipleOf")) return compile_multiple_of(schema, pointer, /*integers=*/false);
  // Each bound as the inclusive double bound it implies; the tighter one wins.
  std::optional<double> lo, hi;
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return OG_ERROR("json schema: \"", key, "\" must be a finite number at ", shown(pointer));
    }
    const std::string k = key;
    const bool lower = k.find("inimum") != std::string::npos;
    const double d = inner_bound(*it, k.starts_with("exclusive"), lower ? HUGE_VAL : -HUGE_VAL);
    if (lower) lo = lo ? std::max(*lo, d) : d;
    else hi = hi ? std::min(*hi, d) : d;
  }
  if (!lo && !hi) return json_.number();
  // Past the largest double (an exclusive bound at it) nothing is left.
  if ((lo && !std::isfinite(*lo)) || (hi && !std::isfinite(*hi)) || (lo && hi && *lo > *hi)) {
    return R::ref(g_.nothing("empty number range"));
  }
  const auto decimal = [](std::optional<double> d) { return d ? std::optional<JsonGrammar::Decimal>(decimal_of(*d)) : std::nullopt; };
  return json_.number_range(decimal(lo), decimal(hi));
}

Result<Symbol> SchemaCompiler::compile_integer(const OrderedJson& schema, const std::string& pointer) {
  if (schema.contains("multipleOf")) return compile_multiple_of(schema, pointer, /*integers=*/true);
  std::optional<int64_t> lo, hi;
  // Integer bounds from number bounds: x >= 1.5 is x >= 2; x > 2 is x >= 3.
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_number()) return OG_ERROR("json schema: \"", key, "\" must be a number at ", shown(pointer));
    const double v = it->get<double>();
    const std::string k = key;
    double bound = k == "minimum" ? std::ceil(v) : k == "exclusiveMinimum" ? std::floor(v) + 1
                 : k == "maximum" ? std::floor(v) : std::ceil(v) - 1;
    if (!(std::fabs(bound) < 9.2e18)) return OG_ERROR("json schema: \"", key, "\" outside the 64-bit integers at ", shown(pointer));
    const auto b = static_cast<int64_t>(bound);
    if (k.find("inimum") != std::string::npos) lo = lo ? std::max(*lo, b) : b;
    else hi = hi ? std::min(*hi, b) : b;
  }
  if (lo && hi && *lo > *hi) return R::ref(g_.nothing("empty integer range"));
  return json_.integer(lo, hi);
}

Result<Symbol> SchemaCompiler::compile_array(const OrderedJson& schema, const std::string& pointer, int depth) {
  OG_ASSIGN_OR_RETURN(int64_t min, count_keyword(schema, "minItems", pointer));
  OG_ASSIGN_OR_RETURN(const int64_t max, count_keyword(schema, "maxItems", pointer));
  min = std::max<int64_t>(min, 0);
  // Draft-07: "items" as an array is the prefix and additionalItems the rest; 2020-12 spells
  // these prefixItems and items.
  const OrderedJson* prefix = nullptr;
  const OrderedJson* rest = nullptr;
  std::string prefix_key = "prefixItems", rest_key = "items";
  if (draft_ == SchemaDraft::kDraft7) {
    if (schema.contains("prefixItems")) return OG_ERROR("json schema: unsupported keyword \"prefixItems\" in draft-07 at ", shown(pointer));
    if (schema.contains("items") && schema["items"].is_array()) {
      prefix_key = "items", rest_key = "additionalItems";
    }
  } else if (schema.contains("additionalItems")) {
    return OG_ERROR("json schema: unsupported keyword \"additionalItems\" in draft 2020-12 at ", shown(pointer));
  }
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != false && !(max >= 0 && max <= 1)) {
    return compile_unique_items(schema, pointer, depth, min, max);
  }
  if (schema.contains(prefix_key)) prefix = &schema[prefix_key];
  if (schema.contains(rest_key)) rest = &schema[rest_key];
  if (prefix != nullptr && !prefix->is_array()) return OG_ERROR("json schema: \"", prefix_key, "\" must be an array at ", shown(pointer));
  std::vector<Symbol> items;
  if (prefix != nullptr) {
    for (size_t i = 0; i < prefix->size(); ++i) {
      OG_ASSIGN_OR_RETURN(const Symbol s, compile((*prefix)[i], pointer + "/" + prefix_key + "/" + std::to_string(i), depth + 1));
      items.push_back(s);
    }
  }
  std::optional<Symbol> more;  // unset: no items past the prefix
  if (rest == nullptr || *rest == true) {
    more = json_.any_value();
  } else if (*rest != false) {
    OG_ASSIGN_OR_RETURN(more, compile(*rest, pointer + "/" + rest_key, depth + 1));
  }
  // contains: each item also has a variant matching it (the item's schema and contains'), and
  // the states come in two layers, before and after one such item was written.
  std::vector<Symbol> matching;
  std::optional<Symbol> more_matching;
  if (auto contains = schema.find("contains"); contains != schema.end()) {
    const auto both = [&](const OrderedJson* item, const std::string& at) {
      return compile(item ? OrderedJson{{"allOf", OrderedJson::array({*item, *contains})}} : *contains, at, depth + 1);
    };
    for (size_t i = 0; i < items.size(); ++i) {
      OG_ASSIGN_OR_RETURN(const Symbol s, both(&(*prefix)[i], pointer + "/" + prefix_key + "/" + std::to_string(i)));
      matching.push_back(s);
    }
    if (more) {
      OG_ASSIGN_OR_RETURN(more_matching, both(rest, pointer + "/contains"));
    }
  }
  const bool counts_contains = schema.contains("contains");
  // after[layer][i]: i items written; "]" once at least min (and past a contained item), another
  // item while under max. Past the prefix and min, an unbounded array loops on its last state
  // (at least 1: it writes the comma).
  const int64_t last = max >= 0 ? max : std::max<int64_t>({static_cast<int64_t>(items.size()), min, 1});
  const size_t layers = counts_contains ? 2 : 1;
  std::vector<std::vector<int32_t>> after(layers);
  for (auto& layer : after) {
    for (int64_t i = 0; i <= last; ++i) layer.push_back(g_.new_rule("items " + pointer));
  }
  for (size_t layer = 0; layer < layers; ++layer) {
    for (int64_t i = 0; i <= last; ++i) {
      const int32_t rule = after[layer][static_cast<size_t>(i)];
      if (i >= min && layer + 1 == layers) g_.add_alt(rule, {g_.byte(']')});
      const bool in_prefix = i < static_cast<int64_t>(items.size());
      if ((max >= 0 && i >= max) || (!in_prefix && !more)) continue;
      const auto next = static_cast<size_t>(i == last ? i : i + 1);
      const auto add_item = [&](Symbol item, size_t to_layer) {
        std::vector<Symbol> seq;
        if (i > 0) seq = {g_.byte(','), json_.ws()};
        seq.insert(seq.end(), {item, json_.ws(), R::ref(after[to_layer][next])});
        g_.add_alt(rule, std::move(seq));
      };
      add_item(in_prefix ? items[static_cast<size_t>(i)] : *more, layer);
      if (layer == 0 && counts_contains) add_item(in_prefix ? matching[static_cast<size_t>(i)] : *more_matching, 1);
    }
  }
  const int32_t array = g_.new_rule("array " + pointer);
  g_.add_alt(array, {g_.byte('['), json_.ws(), R::ref(after[0][0])});
  return R::ref(array);
}

// The items are values from a finite set of scalars (enum, const, boolean, null): one state per
// subset of the values written so far, and a value is written only outside its state's subset.
// Values equal as JSON (1 and 1.0) are one value, in any of their spellings.
Result<Symbol> SchemaCompiler::compile_unique_items(const OrderedJson& schema, const std::string& pointer, int depth,
                                                    int64_t min, int64_t max) {
  const auto refused = [&] {
    return OG_ERROR("json schema: unsupported keyword \"uniqueItems\" (only over items of at most ", kMaxUniqueValues,
                    " enum/const, boolean or null values) at ", shown(pointer));
  };
  const auto items = schema.find("items");
  if (schema["uniqueItems"] != true || items == schema.end() || !items->is_object() || items->contains("$ref") ||
      schema.contains("prefixItems") || schema.contains("contains")) {
    return refused();
  }
  const std::string at = pointer + "/items";
  std::vector<OrderedJson> values;
  if (items->contains("enum") || items->contains("const")) {
    OG_ASSIGN_OR_RETURN(values, enum_values(*items, at, depth + 1));
  } else if (items->contains("type") && only_annotations(*items, "type")) {
    OG_ASSIGN_OR_RETURN(const std::set<std::string> types, types_of(*items, at));
    for (const std::string& t : types) {
      if (t != "boolean" && t != "null") return refused();
    }
    if (types.count("boolean")) values.insert(values.end(), {OrderedJson(true), OrderedJson(false)});
    if (types.count("null")) values.emplace_back(nullptr);
  } else {
    return refused();
  }
  std::vector<std::vector<OrderedJson>> distinct;  // the values, grouped by JSON equality
  for (const OrderedJson& v : values) {
    if (!v.is_primitive()) return refused();
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](const auto& group) { return group[0] == v; });
    if (same == distinct.end()) distinct.push_back({v});
    else same->push_back(v);
  }
  if (distinct.size() > kMaxUniqueValues) return refused();
  std::vector<Symbol> spelled;
  for (const auto& group : distinct) {
    const int32_t rule = g_.new_rule("unique item " + at);
    for (const OrderedJson& v : group) g_.add_alt(rule, {json_.value(v)});
    spelled.push_back(R::ref(rule));
  }
  const size_t n = distinct.size();
  const auto most = static_cast<size_t>(max >= 0 ? std::min<int64_t>(max, static_cast<int64_t>(n)) : static_cast<int64_t>(n));
  std::vector<int32_t> after(size_t{1} << n);  // after[used]: the values in `used` written
  for (int32_t& rule : after) rule = g_.new_rule("unique items " + pointer);
  for (size_t used = 0; used < after.size(); ++used) {
    const auto count = static_cast<size_t>(std::popcount(used));
    if (static_cast<int64_t>(count) >= min) g_.add_alt(after[used], {g_.byte(']')});
    for (size_t k = 0; k < n && count < most; ++k) {
      if (used & (size_t{1} << k)) continue;
      std::vector<Symbol> seq;
      if (used != 0) seq = {g_.byte(','), json_.ws()};
      seq.insert(seq.end(), {spelled[k], json_.ws(), R::ref(after[used | (size_t{1} << k)])});
      g_.add_alt(after[used], std::move(seq));
    }
  }
  const int32_t array = g_.new_rule("array " + pointer);
  g_.add_alt(array, {g_.byte('['), json_.ws(), R::ref(after[0])});
  return R::ref(array);
}

Symbol SchemaCompiler::other_key(const std::vector<std::string>& names) {
  // A trie of the names over code points: at each node the key may end (unless the node spells
  // a name), continue along a child, or leave the trie with any other raw character.
  struct Node {
    std::map<char32_t, size_t> children;
    bool name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    // A name with a character a raw key cannot hold can never be spelled by one.
    if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<uint8_t>(c) < 0x20 || c == '"' || c == '\\'; })) {
      continue;
    }
    size_t at = 0;
    for (size_t i = 0; i < name.size();) {
      const auto b0 = static_cast<uint8_t>(name[i]);
      const size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
      char32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
      for (size_t k = 1; k < n && i + k < name.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(name[i + k]) & 0x3F);
      i += n;
      auto [it, fresh] = trie[at].children.emplace(cp, trie.size());
      if (fresh) trie.emplace_back();
      at = it->second;
    }
    trie[at].name = true;
  }
  const int32_t free_rest = g_.new_rule("key rest");
  g_.add_alt(free_rest, {R::ref(g_.repeat("key chars", json_.raw_string_char(CharClass()), 0, -1)), g_.byte('"')});
  std::vector<int32_t> rules(trie.size());
  for (size_t k = 0; k < trie.size(); ++k) rules[k] = g_.new_rule("other key");
  for (size_t k = 0; k < trie.size(); ++k) {
    if (!trie[k].name) g_.add_alt(rules[k], {g_.byte('"')});
    CharClass children;
    for (const auto& [cp, child] : trie[k].children) {
      children.add(cp);
      std::string bytes;
      append_utf8(bytes, cp);
      std::vector<Symbol> seq;
      g_.append_literal(seq, bytes);
      seq.push_back(R::ref(rules[child]));
      g_.add_alt(rules[k], std::move(seq));
    }
    g_.add_alt(rules[k], {json_.raw_string_char(children), R::ref(free_rest)});
  }
  const int32_t key = g_.new_rule("other key");
  g_.add_alt(key, {g_.byte('"'), R::ref(rules[0])});
  return R::ref(key);
}

}  // namespace onnx_genai::constraints
