// Compares our tokenizer with Hugging Face's on a corpus, from the reference JSON written by
// tests/oracle/tokenizer_reference.mjs in the same test run. Checks, per string:
//   encode with and without special tokens (ids identical), decode of the plain ids and
//   decode with skip_special_tokens (strings identical), and that streaming detokenization
//   concatenates to the full decode. Prints a per-tokenizer summary; exits 1 on any mismatch.
// Usage: tokenizer_conformance_check <corpus.json> <reference.json>...
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "onnx_genai/tokenizer.h"

namespace {

using onnx_genai::Tokenizer;
using Json = nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

std::string ids_text(const std::vector<int32_t>& ids, size_t limit = 40) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < limit; ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  if (ids.size() > limit) out += ",... (" + std::to_string(ids.size()) + " ids)";
  return out + "]";
}

std::string preview(const std::string& text) {
  Json j = text.size() > 80 ? text.substr(0, 80) + "..." : text;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

struct Tally {
  int compared = 0;
  int encode_mismatch = 0;
  int plain_mismatch = 0;
  int decode_mismatch = 0;
  int skip_mismatch = 0;
  int stream_mismatch = 0;
  int round_trips = 0;
  int errors = 0;
  int shown = 0;
};

void report(Tally& t, const std::string& what, const std::string& text, const std::string& ours, const std::string& theirs) {
  if (t.shown++ >= 4) return;
  std::cout << "  MISMATCH " << what << " for " << preview(text) << "\n    ours: " << ours << "\n    hf:   " << theirs << "\n";
}

std::string stream_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool& ok) {
  onnx_genai::StreamingDetokenizer stream(tokenizer);
  std::string text;
  ok = true;
  for (int32_t id : ids) {
    auto piece = stream.put(id);
    if (!piece) {
      ok = false;
      return piece.status().message();
    }
    text += *piece;
  }
  auto rest = stream.flush();
  ok = rest.is_ok();
  return ok ? text + *rest : rest.status().message();
}

bool check(const std::vector<std::string>& corpus, const Json& reference) {
  const std::string name = reference.at("name");
  const auto started = std::chrono::steady_clock::now();
  auto loaded = Tokenizer::load(reference.at("model_dir").get<std::string>());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!loaded) {
    std::cout << name << ": LOAD FAILED: " << loaded.status().message() << "\n";
    return false;
  }
  const Tokenizer& tokenizer = **loaded;
  const Json& cases = reference.at("cases");
  if (cases.size() != corpus.size()) {
    std::cout << name << ": reference has " << cases.size() << " cases for " << corpus.size() << " strings\n";
    return false;
  }
  Tally t;
  std::cout << name << ":\n";
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string& text = corpus[i];
    const Json& ref = cases[i];
    ++t.compared;
    auto ids = tokenizer.encode(text);
    auto plain = tokenizer.encode(text, {.add_special_tokens = false});
    if (!ids || !plain) {
      ++t.errors;
      report(t, "encode error", text, (!ids ? ids : plain).status().message(), "ok");
      continue;
    }
    const auto ref_ids = ref.at("ids").get<std::vector<int32_t>>();
    const auto ref_plain = ref.at("ids_plain").get<std::vector<int32_t>>();
    if (*ids != ref_ids) {
      ++t.encode_mismatch;
      report(t, "encode", text, ids_text(*ids), ids_text(ref_ids));
    }
    if (*plain != ref_plain) {
      ++t.plain_mismatch;
      report(t, "encode (no special tokens)", text, ids_text(*plain), ids_text(ref_plain));
    }
    // Decode the reference's ids so a decode difference is not hidden by an encode one.
    if (!ref.at("decoded").is_null()) {
      const std::string expected = ref.at("decoded");
      auto decoded = tokenizer.decode(ref_plain);
      if (!decoded || *decoded != expected) {
        ++t.decode_mismatch;
        report(t, "decode", text, decoded ? preview(*decoded) : decoded.status().message(), preview(expected));
      }
      if (decoded && *decoded == text) ++t.round_trips;
      bool ok = false;
      const std::string streamed = stream_decode(tokenizer, ref_plain, ok);
      if (!ok || (decoded && streamed != *decoded)) {
        ++t.stream_mismatch;
        report(t, "streaming decode", text, preview(streamed), decoded ? preview(*decoded) : "");
      }
    } else if (text.empty()) {
      ++t.round_trips;
    }
    if (!ref.at("decoded_skip").is_null()) {
      const std::string expected = ref.at("decoded_skip");
      auto decoded = tokenizer.decode(ref_ids, {.skip_special_tokens = true});
      if (!decoded || *decoded != expected) {
        ++t.skip_mismatch;
        report(t, "decode (skip special tokens)", text, decoded ? preview(*decoded) : decoded.status().message(), preview(expected));
      }
    }
  }
  const int mismatches = t.encode_mismatch + t.plain_mismatch + t.decode_mismatch + t.skip_mismatch + t.stream_mismatch + t.errors;
  std::printf("  %s: %d strings, load %.0f ms; mismatches: encode %d, encode-plain %d, decode %d, decode-skip %d, "
              "stream %d, errors %d; decode(encode(x)) == x for %d\n",
              mismatches ? "FAIL" : "PASS", t.compared, load_ms, t.encode_mismatch, t.plain_mismatch, t.decode_mismatch,
              t.skip_mismatch, t.stream_mismatch, t.errors, t.round_trips);
  return mismatches == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <corpus.json> <reference.json>...\n";
    return 2;
  }
  const Json corpus_json = Json::parse(read_file(argv[1]), nullptr, false);
  if (!corpus_json.is_array()) {
    std::cerr << "cannot read corpus " << argv[1] << "\n";
    return 2;
  }
  const auto corpus = corpus_json.get<std::vector<std::string>>();
  bool all_ok = true;
  for (int i = 2; i < argc; ++i) {
    const Json reference = Json::parse(read_file(argv[i]), nullptr, false);
    if (!reference.is_object()) {
      std::cerr << "cannot read reference " << argv[i] << "\n";
      return 2;
    }
    all_ok = check(corpus, reference) && all_ok;
  }
  return all_ok ? 0 : 1;
}
