// A model package on disk: which .onnx file is the decoder, what the configs say about it, and
// where the tokenizer files are. Two layouts are read:
//
//   onnxruntime-genai   genai_config.json: model.decoder.{filename, inputs, outputs, head counts},
//                       model.{context_length, eos_token_id (int or list), pad/bos}, search.*
//   Hugging Face        config.json + model.onnx | model_q4.onnx | model_fp16.onnx (also under
//                       onnx/), as Optimum and transformers.js exports are laid out
//
// either with tokenizer.json, tokenizer_config.json (chat template, special tokens),
// chat_template.jinja and generation_config.json (sampling defaults, a list of eos ids) beside it.
// Nothing here is per architecture: the configs only name things and give defaults; the decoder's
// I/O is derived from the graph (decoder_io.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "onnx_genai/genai.h"
#include "onnx_genai/status.h"

namespace onnx_genai::genai {

// What genai_config.json names; empty strings mean "find it in the graph".
struct DecoderNames {
  std::string input_ids, attention_mask, position_ids;
  std::string past_key, past_value;  // printf-style templates with one %d (the layer)
  std::string logits;
  std::string present_key, present_value;
};

// Generation defaults from genai_config.json's "search" or generation_config.json; unset when
// neither gives a value.
struct SearchDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, min_p, typical_p, repetition_penalty;
  std::optional<int64_t> top_k, no_repeat_ngram_size;
  std::optional<int64_t> max_length, max_new_tokens, min_new_tokens;
  std::optional<int64_t> num_beams, num_return_sequences;
  std::optional<double> length_penalty;
  std::optional<EarlyStopping> early_stopping;  // true, false or "never"
};

struct Package {
  std::filesystem::path dir;
  std::filesystem::path model_file;  // the decoder .onnx
  std::string config_name;           // "genai_config.json" or "config.json"
  DecoderNames names;
  std::optional<int64_t> num_layers, num_heads, num_kv_heads, head_size, vocab_size;
  // The config keys the last three came from, for messages ("model.decoder.head_size").
  struct Keys {
    std::string num_kv_heads, head_size, vocab_size;
  } keys;
  int64_t context_length = 0;  // 0 when no config gives one
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> pad_token_id, bos_token_id;
  std::optional<bool> past_present_share_buffer;
  SearchDefaults search;
  bool has_tokenizer = false;  // tokenizer.json present
};

// Loads the package at `path`: a folder, or an .onnx file whose folder holds the configs.
// `onnx_file` (may be empty) picks the decoder file inside the folder. Errors name the file
// and, for bad values, the key.
Result<Package> load_package(const std::string& path, const std::string& onnx_file = {});

}  // namespace onnx_genai::genai
