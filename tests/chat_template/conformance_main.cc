// Conformance checker: renders every (template, conversation) that tests/oracle/chat_template_render.mjs
// (real templates) or chat_template_expressions.mjs (generated expressions) rendered with
// @huggingface/jinja, and compares byte for byte.
//
// usage: chat_template_conformance <refs.json>
//
// A case passes when the reference rendered and our text is identical, or when the reference's
// template raised (raise_exception) and ours raised with the same message. Cases where the reference
// itself failed otherwise are listed with its reason; they do not count as mismatches. Where the
// reference failed only on a filter it lacks and our renderer implements with Jinja2 semantics
// (select, reject, round, count, d, bare default), the case is listed apart with what ours does.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "onnx_genai/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;
using onnx_genai::ChatRequest;
using onnx_genai::ChatTemplates;
using onnx_genai::Result;

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream out;
  out << "first difference at byte " << i << " (expected " << expected.size() << " bytes, got " << actual.size() << ")\n"
      << "      expected: ..." << escape(expected.substr(from, 120)) << "\n"
      << "      actual:   ..." << escape(actual.substr(from, 120));
  return out.str();
}

Result<ChatTemplates> load_template(const Json& entry) {
  const Json& origin = entry["origin"];
  if (origin.contains("model_dir")) return ChatTemplates::load(origin["model_dir"].get<std::string>());
  std::string source;
  if (origin.contains("source")) {
    source = origin["source"].get<std::string>();
  } else {
    std::ifstream in(origin["template_file"].get<std::string>(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    source = text.str();
  }
  std::vector<std::pair<std::string, std::string>> tokens;
  for (auto it = entry["special_tokens"].begin(); it != entry["special_tokens"].end(); ++it) {
    tokens.emplace_back(it.key(), it.value().get<std::string>());
  }
  return ChatTemplates::from_source(source, std::move(tokens));
}

ChatRequest request_of(const Json& conversation) {
  ChatRequest request;
  request.messages_json = conversation["messages"].dump();
  if (!conversation["tools"].is_null()) request.tools_json = conversation["tools"].dump();
  request.add_generation_prompt = conversation["add_generation_prompt"].get<bool>();
  if (!conversation["extra"].empty()) request.extra_context_json = conversation["extra"].dump();
  return request;
}

// The filter named by a reference failure that @huggingface/jinja 0.5.11 lacks and ours has, or "".
// Matches "Unknown <Type> filter: <name>" by hand: GCC 12 reports false maybe-uninitialized
// warnings inside std::regex under the sanitizer build's -O2.
std::string filter_reference_lacks(const std::string& reason) {
  static const std::string kPrefix = "Unknown ";
  static const std::string kMiddle = " filter: ";
  if (reason.rfind(kPrefix, 0) != 0) return "";
  const size_t middle = reason.find(kMiddle, kPrefix.size());
  if (middle == std::string::npos || middle == kPrefix.size()) return "";
  for (size_t i = kPrefix.size(); i < middle; ++i) {
    const unsigned char c = static_cast<unsigned char>(reason[i]);
    if (!std::isalnum(c) && c != '_') return "";  // the type name is one word
  }
  const std::string name = reason.substr(middle + kMiddle.size());
  for (const char* lacking : {"select", "reject", "round", "count", "d", "default"}) {
    if (name == lacking) return name;
  }
  return "";
}

struct Totals {
  int templates = 0, templates_passing = 0;
  int cases = 0, reference_ok = 0, matches = 0, mismatches = 0;
  int reference_raised = 0, raised_too = 0;
  int reference_failed = 0, failed_too = 0;
  int reference_lacks_filter = 0, lacking_ours_renders = 0;
};

// Checks one template's cases; returns false on any mismatch.
bool check_template(const Json& entry, Totals& totals, std::map<std::string, int>& reference_failures) {
  const std::string name = entry["name"].get<std::string>();
  Result<ChatTemplates> templates = load_template(entry);
  bool passing = true;
  bool first_shown = false;
  for (const Json& conversation : entry["cases"]) {
    ++totals.cases;
    const std::string id = conversation["id"].get<std::string>();
    Result<std::string> ours = templates.is_ok() ? templates->apply(request_of(conversation)) : Result<std::string>(templates.status());
    if (conversation["ok"].get<bool>()) {
      ++totals.reference_ok;
      const std::string expected = conversation["text"].get<std::string>();
      if (ours.is_ok() && *ours == expected) {
        ++totals.matches;
        continue;
      }
      ++totals.mismatches;
      passing = false;
      if (!first_shown) {
        first_shown = true;
        std::printf("MISMATCH %s [%s]\n    %s\n", name.c_str(), id.c_str(),
                    ours.is_ok() ? first_difference(expected, *ours).c_str() : ("our error: " + ours.status().message()).c_str());
      }
      continue;
    }
    const std::string reason = conversation["error"].get<std::string>();
    if (conversation["raised"].get<bool>()) {
      ++totals.reference_raised;
      const std::string& message = ours.status().message();
      if (!ours.is_ok() && message.size() >= reason.size() && message.compare(message.size() - reason.size(), reason.size(), reason) == 0) {
        ++totals.raised_too;
        continue;
      }
      passing = false;
      ++totals.mismatches;
      if (!first_shown) {
        first_shown = true;
        std::printf("MISMATCH %s [%s]\n    reference raised \"%s\"; ours %s\n", name.c_str(), id.c_str(), reason.c_str(),
                    ours.is_ok() ? "rendered" : ("failed: " + message).c_str());
      }
      continue;
    }
    if (const std::string filter = filter_reference_lacks(reason); !filter.empty()) {
      ++totals.reference_lacks_filter;
      if (ours.is_ok()) ++totals.lacking_ours_renders;
      ++reference_failures[name + ": reference lacks filter " + filter + (ours.is_ok() ? "; ours renders" : "; ours fails: " + ours.status().message())];
      continue;
    }
    ++totals.reference_failed;
    if (!ours.is_ok()) ++totals.failed_too;
    ++reference_failures[name + ": " + reason + (ours.is_ok() ? "  [ours renders]" : "  [ours fails too]")];
  }
  return passing;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <refs.json>\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  const Json refs = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (refs.is_discarded() || !refs.contains("templates")) {
    std::fprintf(stderr, "%s: not a reference file from chat_template_render.mjs\n", argv[1]);
    return 2;
  }
  Totals totals;
  std::map<std::string, int> reference_failures;
  for (const Json& entry : refs["templates"]) {
    ++totals.templates;
    if (check_template(entry, totals, reference_failures)) ++totals.templates_passing;
  }
  std::printf("\nreference failures (not raise_exception), with what our renderer does:\n");
  for (const auto& [reason, count] : reference_failures) std::printf("  %3d x %s\n", count, reason.c_str());
  std::printf("\ntemplates: %d passing / %d\n", totals.templates_passing, totals.templates);
  std::printf("conversations: %d; reference rendered %d: %d match, %d mismatch\n", totals.cases, totals.reference_ok,
              totals.matches, totals.reference_ok - totals.matches);
  std::printf("reference raise_exception: %d, ours raised the same message: %d\n", totals.reference_raised, totals.raised_too);
  std::printf("reference lacks a filter ours has (select/reject/round/count/d/default): %d (ours renders: %d)\n",
              totals.reference_lacks_filter, totals.lacking_ours_renders);
  std::printf("reference failed otherwise: %d (ours fails too: %d)\n", totals.reference_failed, totals.failed_too);
  if (totals.cases == 0) {
    std::printf("FAIL: no conversations\n");
    return 1;
  }
  return totals.mismatches == 0 ? 0 : 1;
}
