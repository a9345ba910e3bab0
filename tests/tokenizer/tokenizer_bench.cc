// Tokenizer throughput: load time, encode and decode MB/s on a fixed text file, one line of
// JSON per tokenizer so bench/tokenizer_bench.mjs can print them next to Hugging Face's numbers.
// Load time is the median (and minimum) of several loads on this one thread, file read included;
// the budget for a 150k-token tokenizer.json is 150 ms.
// Usage: tokenizer_bench <text file> <model dir>...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "onnx_genai/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <text file> <model dir>...\n";
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  std::ostringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  if (text.empty()) {
    std::cerr << "empty or missing text file " << argv[1] << "\n";
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    constexpr int kLoads = 7;
    std::vector<double> load_s;
    auto tokenizer = onnx_genai::Tokenizer::load(argv[i]);
    for (int r = 0; r < kLoads && tokenizer; ++r) {
      const auto start = std::chrono::steady_clock::now();
      auto loaded = onnx_genai::Tokenizer::load(argv[i]);
      load_s.push_back(seconds_since(start));
      tokenizer = std::move(loaded);  // frees the previous one outside the timed span
    }
    if (!tokenizer) {
      std::cerr << tokenizer.status().message() << "\n";
      return 1;
    }
    std::sort(load_s.begin(), load_s.end());
    // First pass warms the word cache, as a long-running server would be.
    auto ids = (*tokenizer)->encode(text);
    if (!ids) {
      std::cerr << ids.status().message() << "\n";
      return 1;
    }
    constexpr int kRepeats = 3;
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < kRepeats; ++r) ids = (*tokenizer)->encode(text);
    const double encode_s = seconds_since(start) / kRepeats;
    start = std::chrono::steady_clock::now();
    size_t decoded_bytes = 0;
    for (int r = 0; r < kRepeats; ++r) decoded_bytes = (*tokenizer)->decode(*ids)->size();
    const double decode_s = seconds_since(start) / kRepeats;
    std::printf("{\"model\": \"%s\", \"load_ms\": %.1f, \"load_min_ms\": %.1f, \"bytes\": %zu, \"tokens\": %zu, "
                "\"encode_mb_s\": %.2f, \"decode_mb_s\": %.2f}\n",
                argv[i], load_s[kLoads / 2] * 1e3, load_s[0] * 1e3, text.size(), ids->size(),
                text.size() / encode_s / 1e6, decoded_bytes / decode_s / 1e6);
  }
  return 0;
}
