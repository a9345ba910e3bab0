#include "genai/package.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>

#include "genai/json_fields.h"

namespace onnx_genai::genai {

namespace {

namespace fs = std::filesystem;

constexpr const char* kGenaiConfig = "genai_config.json";
constexpr const char* kHfConfig = "config.json";
constexpr const char* kGenerationConfig = "generation_config.json";

// Hugging Face exports: the decoder files tried in this order, in the folder and under onnx/.
constexpr std::array<const char*, 3> kHfModelFiles = {"model.onnx", "model_q4.onnx", "model_fp16.onnx"};

std::string where(const fs::path& file, const std::string& prefix = {}) { return file.string() + ": " + prefix; }

void append_unique(std::vector<int32_t>& ids, const std::vector<int32_t>& more) {
  for (const int32_t id : more) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
}

Result<std::optional<int32_t>> token_id(const JsonFields& fields, const char* key, std::optional<int64_t> vocab_size) {
  OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, fields.token_ids(key, vocab_size));
  return ids.empty() ? std::optional<int32_t>() : std::optional<int32_t>(ids.front());
}

// Token ids shared by genai_config.json's model section, config.json and generation_config.json;
// each below the config's vocab_size (the graph's is checked once the decoder is loaded).
Status read_token_ids(const JsonFields& fields, Package& package) {
  OG_ASSIGN_OR_RETURN(std::vector<int32_t> eos, fields.token_ids("eos_token_id", package.vocab_size));
  append_unique(package.eos_token_ids, eos);
  OG_ASSIGN_OR_RETURN(std::optional<int32_t> pad, token_id(fields, "pad_token_id", package.vocab_size));
  OG_ASSIGN_OR_RETURN(std::optional<int32_t> bos, token_id(fields, "bos_token_id", package.vocab_size));
  if (!package.pad_token_id) package.pad_token_id = pad;
  if (!package.bos_token_id) package.bos_token_id = bos;
  return Status::ok();
}

// Sampling defaults; values already set (by an earlier, higher-priority file) are kept.
Status read_search(const JsonFields& fields, SearchDefaults& search) {
  const auto fill = [](auto& slot, auto value) {
    if (!slot) slot = value;
  };
  OG_ASSIGN_OR_RETURN(auto do_sample, fields.boolean("do_sample"));
  fill(search.do_sample, do_sample);
  for (const auto& [key, slot] : {std::pair{"temperature", &search.temperature}, std::pair{"top_p", &search.top_p},
                                  std::pair{"min_p", &search.min_p}, std::pair{"typical_p", &search.typical_p},
                                  std::pair{"repetition_penalty", &search.repetition_penalty},
                                  std::pair{"length_penalty", &search.length_penalty}}) {
    OG_ASSIGN_OR_RETURN(auto value, fields.number(key));
    fill(*slot, value);
  }
  for (const auto& [key, slot] :
       {std::pair{"top_k", &search.top_k}, std::pair{"no_repeat_ngram_size", &search.no_repeat_ngram_size},
        std::pair{"max_length", &search.max_length}, std::pair{"max_new_tokens", &search.max_new_tokens},
        std::pair{"min_new_tokens", &search.min_new_tokens}}) {
    OG_ASSIGN_OR_RETURN(auto value, fields.integer(key, 0));
    fill(*slot, value);
  }
  for (const auto& [key, slot] :
       {std::pair{"num_beams", &search.num_beams}, std::pair{"num_return_sequences", &search.num_return_sequences}}) {
    OG_ASSIGN_OR_RETURN(auto value, fields.integer(key, 1));
    fill(*slot, value);
  }
  // transformers' early_stopping is a bool or the string "never".
  if (auto stopping = fields.boolean("early_stopping"); stopping.is_ok()) {
    if (*stopping) fill(search.early_stopping, **stopping ? EarlyStopping::kTrue : EarlyStopping::kHeuristic);
  } else {
    OG_ASSIGN_OR_RETURN(auto text, fields.string("early_stopping"));
    if (text != "never") return stopping.status();
    fill(search.early_stopping, EarlyStopping::kNever);
  }
  return Status::ok();
}

// A size or count, an integer >= 1 where present (a 0 or a negative one is a broken config): the
// first of `keys` the config sets. Older Hugging Face families name the same numbers differently
// (GPT-2, GPT-J, CodeGen: n_layer, n_head, n_embd, n_positions; MPT: n_layers, n_heads, d_model,
// max_seq_len) — transformers maps them with each config's attribute_map.
Status read_size(const JsonFields& fields, std::initializer_list<const char*> keys, std::optional<int64_t>& slot) {
  for (const char* key : keys) {
    OG_ASSIGN_OR_RETURN(slot, fields.integer(key, 1));
    if (slot) break;
  }
  return Status::ok();
}

Status read_sizes(const JsonFields& fields, std::initializer_list<std::pair<const char*, std::optional<int64_t>*>> slots) {
  for (const auto& [key, slot] : slots) OG_RETURN_IF_ERROR(read_size(fields, {key}, *slot));
  return Status::ok();
}

Result<std::string> io_name(const JsonFields& fields, const char* key) {
  OG_ASSIGN_OR_RETURN(auto name, fields.string(key));
  return name.value_or("");
}

Status read_decoder_names(const JsonFields& decoder, DecoderNames& names) {
  OG_ASSIGN_OR_RETURN(JsonFields inputs, decoder.nested("inputs"));
  OG_ASSIGN_OR_RETURN(JsonFields outputs, decoder.nested("outputs"));
  OG_ASSIGN_OR_RETURN(names.input_ids, io_name(inputs, "input_ids"));
  OG_ASSIGN_OR_RETURN(names.attention_mask, io_name(inputs, "attention_mask"));
  OG_ASSIGN_OR_RETURN(names.position_ids, io_name(inputs, "position_ids"));
  OG_ASSIGN_OR_RETURN(names.past_key, io_name(inputs, "past_key_names"));
  OG_ASSIGN_OR_RETURN(names.past_value, io_name(inputs, "past_value_names"));
  OG_ASSIGN_OR_RETURN(names.logits, io_name(outputs, "logits"));
  OG_ASSIGN_OR_RETURN(names.present_key, io_name(outputs, "present_key_names"));
  OG_ASSIGN_OR_RETURN(names.present_value, io_name(outputs, "present_value_names"));
  return Status::ok();
}

Status read_genai_config(const fs::path& file, Package& package, std::string& decoder_file) {
  OG_ASSIGN_OR_RETURN(Json json, read_json_object(file));
  const JsonFields root(json, where(file));
  OG_ASSIGN_OR_RETURN(JsonFields model, root.nested("model"));
  OG_ASSIGN_OR_RETURN(JsonFields decoder, model.nested("decoder"));
  OG_ASSIGN_OR_RETURN(JsonFields search, root.nested("search"));
  OG_ASSIGN_OR_RETURN(auto filename, decoder.string("filename"));
  decoder_file = filename.value_or("model.onnx");
  OG_RETURN_IF_ERROR(read_decoder_names(decoder, package.names));
  OG_RETURN_IF_ERROR(read_sizes(decoder, {{"num_hidden_layers", &package.num_layers},
                                           {"num_attention_heads", &package.num_heads},
                                           {"num_key_value_heads", &package.num_kv_heads},
                                           {"head_size", &package.head_size}}));
  std::optional<int64_t> context;
  OG_RETURN_IF_ERROR(read_sizes(model, {{"vocab_size", &package.vocab_size}, {"context_length", &context}}));
  package.context_length = context.value_or(0);
  package.keys = {"model.decoder.num_key_value_heads", "model.decoder.head_size", "model.vocab_size"};
  OG_RETURN_IF_ERROR(read_token_ids(model, package));
  OG_ASSIGN_OR_RETURN(package.past_present_share_buffer, search.boolean("past_present_share_buffer"));
  return read_search(search, package.search);
}

Status read_hf_config(const fs::path& file, Package& package) {
  OG_ASSIGN_OR_RETURN(Json json, read_json_object(file));
  const JsonFields top(json, where(file));
  // Multimodal configs (Gemma 3, ...) keep the language model's numbers under text_config.
  OG_ASSIGN_OR_RETURN(const Json* text_config, top.object("text_config"));
  const bool nested = text_config != nullptr && !json.contains("num_hidden_layers");
  const JsonFields fields(nested ? *text_config : json, where(file, nested ? "text_config." : ""));
  std::optional<int64_t> hidden, context;
  OG_RETURN_IF_ERROR(read_size(fields, {"num_hidden_layers", "n_layer", "n_layers"}, package.num_layers));
  OG_RETURN_IF_ERROR(read_size(fields, {"num_attention_heads", "n_head", "n_heads"}, package.num_heads));
  OG_RETURN_IF_ERROR(read_sizes(fields, {{"num_key_value_heads", &package.num_kv_heads},
                                         {"head_dim", &package.head_size},
                                         {"vocab_size", &package.vocab_size}}));
  OG_RETURN_IF_ERROR(read_size(fields, {"hidden_size", "n_embd", "d_model"}, hidden));
  OG_RETURN_IF_ERROR(read_size(fields, {"max_position_embeddings", "n_positions", "max_seq_len"}, context));
  const std::string prefix = nested ? "text_config." : "";
  package.keys = {prefix + (package.num_kv_heads ? "num_key_value_heads" : "num_attention_heads"),
                  prefix + (package.head_size ? "head_dim" : "hidden_size / num_attention_heads"),
                  prefix + "vocab_size"};
  if (!package.num_kv_heads) package.num_kv_heads = package.num_heads;
  if (!package.head_size && hidden && package.num_heads) package.head_size = *hidden / *package.num_heads;
  package.context_length = context.value_or(0);
  OG_RETURN_IF_ERROR(read_token_ids(fields, package));
  // Top-level ids of a multimodal config describe the whole model; they also count.
  if (nested) OG_RETURN_IF_ERROR(read_token_ids(top, package));
  return Status::ok();
}

Result<fs::path> existing_file(const fs::path& file, const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return OG_ERROR(file.string(), ": ", what, " not found");
  return file;
}

Result<fs::path> find_hf_model_file(const fs::path& dir) {
  std::string tried;
  for (const fs::path& folder : {dir, dir / "onnx"}) {
    for (const char* name : kHfModelFiles) {
      std::error_code ec;
      if (fs::is_regular_file(folder / name, ec)) return folder / name;
      tried += (tried.empty() ? "" : ", ") + (folder / name).lexically_relative(dir).string();
    }
  }
  return OG_ERROR(dir.string(), ": no decoder model file (looked for ", tried, ")");
}

Result<fs::path> check_model_dir(const std::string& path, fs::path& explicit_file) {
  std::error_code ec;
  const fs::path given(path);
  if (fs::is_directory(given, ec)) return given;
  if (fs::is_regular_file(given, ec)) {
    explicit_file = given;
    return given.has_parent_path() ? given.parent_path() : fs::path(".");
  }
  return OG_ERROR(path, ": no such model folder or file");
}

}  // namespace

Result<Package> load_package(const std::string& path, const std::string& onnx_file) {
  Package package;
  fs::path explicit_file;
  OG_ASSIGN_OR_RETURN(package.dir, check_model_dir(path, explicit_file));
  if (!onnx_file.empty()) explicit_file = package.dir / onnx_file;
  std::error_code ec;
  const fs::path genai_config = package.dir / kGenaiConfig;
  const fs::path hf_config = package.dir / kHfConfig;
  if (fs::exists(genai_config, ec)) {
    package.config_name = kGenaiConfig;
    std::string decoder_file;
    OG_RETURN_IF_ERROR(read_genai_config(genai_config, package, decoder_file));
    if (explicit_file.empty()) explicit_file = package.dir / decoder_file;
  } else if (fs::exists(hf_config, ec)) {
    package.config_name = kHfConfig;
    OG_RETURN_IF_ERROR(read_hf_config(hf_config, package));
  } else {
    return OG_ERROR(package.dir.string(), ": no ", kGenaiConfig, " or ", kHfConfig,
                    " (expected an onnxruntime-genai package or a Hugging Face ONNX export)");
  }
  if (explicit_file.empty()) {
    OG_ASSIGN_OR_RETURN(package.model_file, find_hf_model_file(package.dir));
  } else {
    OG_ASSIGN_OR_RETURN(package.model_file, existing_file(explicit_file, "decoder model file"));
  }

  const fs::path generation_config = package.dir / kGenerationConfig;
  if (fs::exists(generation_config, ec)) {
    OG_ASSIGN_OR_RETURN(Json json, read_json_object(generation_config));
    const JsonFields fields(json, where(generation_config));
    OG_RETURN_IF_ERROR(read_token_ids(fields, package));
    OG_RETURN_IF_ERROR(read_search(fields, package.search));
  }
  package.has_tokenizer = fs::is_regular_file(package.dir / "tokenizer.json", ec);
  return package;
}

}  // namespace onnx_genai::genai
