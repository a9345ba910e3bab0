// Tokenizer: loads tokenizer.json (+ tokenizer_config.json) and runs the encode pipeline:
//   split out added tokens -> normalize each section -> split out normalized added tokens ->
//   pre-tokenize -> model -> fuse unknowns -> post-process.
#include "onnx_genai/tokenizer.h"

#include <filesystem>
#include <unordered_set>

#include "core/file_reader.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/components.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/unicode.h"

namespace onnx_genai {

using tokenizer::Json;

struct Tokenizer::Impl {
  tokenizer::Vocabulary vocab;
  std::unique_ptr<tokenizer::Model> model;
  std::unique_ptr<tokenizer::Normalizer> normalizer;
  std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tokenizer::PostProcessor> post_processor;
  std::unique_ptr<tokenizer::Decoder> decoder;
  std::unique_ptr<tokenizer::Decoder> raw_decoder;  // the same chain keeping byte tokens raw
  tokenizer::AddedTokenMatcher raw_tokens;         // matched in the text as written
  tokenizer::AddedTokenMatcher normalized_tokens;  // matched after the normalizer ran
  std::unordered_set<std::string> added_contents;
  std::unordered_set<std::string, tokenizer::StringHash, std::equal_to<>> special_contents;
  std::vector<bool> special_ids;
  bool clean_up_tokenization_spaces = true;
  std::optional<int32_t> bos_id, eos_id;
  int32_t anchor_id = -1;  // a plain letter token that token_bytes() decodes others after

  Status encode_section(std::string_view text, int section_index, std::vector<int32_t>& ids) const;
  Status encode_words(std::string_view text, int section_index, std::vector<int32_t>& ids) const;
};

namespace {

Result<Json> parse_json(std::string_view text, const std::string& what) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return OG_ERROR(what, ": not valid JSON");
  return value;
}

Result<tokenizer::AddedToken> parse_added_token(const Json& entry, size_t index) {
  if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() || !entry.contains("content") ||
      !entry["content"].is_string()) {
    return OG_ERROR("added_tokens[", index, "]: needs an integer \"id\" and a string \"content\"");
  }
  const int64_t id = entry["id"].get<int64_t>();
  if (id < 0 || id >= tokenizer::Vocabulary::kMaxId) {
    return OG_ERROR("added_tokens[", index, "]: id ", id, " is out of range");
  }
  tokenizer::AddedToken token;
  token.id = static_cast<int32_t>(id);
  token.content = entry["content"].get<std::string>();
  token.special = tokenizer::json_bool_or(entry, "special", false);
  token.normalized = tokenizer::json_bool_or(entry, "normalized", !token.special);
  token.lstrip = tokenizer::json_bool_or(entry, "lstrip", false);
  token.rstrip = tokenizer::json_bool_or(entry, "rstrip", false);
  token.single_word = tokenizer::json_bool_or(entry, "single_word", false);
  return token;
}

// A token named in tokenizer_config.json: a plain string or {"content": ...} (AddedToken).
std::optional<std::string> config_token(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Status Tokenizer::Impl::encode_words(std::string_view text, int section_index, std::vector<int32_t>& ids) const {
  std::vector<std::string> words{std::string(text)};
  if (pre_tokenizer) OG_RETURN_IF_ERROR(pre_tokenizer->pre_tokenize(words, section_index));
  const size_t first = ids.size();
  for (const std::string& word : words) OG_RETURN_IF_ERROR(model->encode(word, ids));
  if (model->fuses_unknown() && vocab.unk_id >= 0) {
    size_t out = first;
    for (size_t i = first; i < ids.size(); ++i) {
      if (ids[i] == vocab.unk_id && out > first && ids[out - 1] == vocab.unk_id) continue;
      ids[out++] = ids[i];
    }
    ids.resize(out);
  }
  return Status::ok();
}

Status Tokenizer::Impl::encode_section(std::string_view text, int section_index, std::vector<int32_t>& ids) const {
  std::string normalized;
  if (normalizer) {
    OG_ASSIGN_OR_RETURN(normalized, normalizer->normalize(text));
    text = normalized;
  }
  if (text.empty()) return Status::ok();
  if (normalized_tokens.empty()) return encode_words(text, section_index, ids);
  for (const tokenizer::Section& part : normalized_tokens.split(text)) {
    if (part.token >= 0) {
      ids.push_back(normalized_tokens.token(part.token).id);
    } else if (!part.text.empty()) {
      OG_RETURN_IF_ERROR(encode_words(part.text, section_index, ids));
    }
  }
  return Status::ok();
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  if (auto bad = unicode::find_invalid_utf8(text)) {
    return OG_ERROR("encode: input is not valid UTF-8 (byte offset ", *bad, ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  const std::vector<tokenizer::Section> sections =
      impl_->raw_tokens.empty() ? std::vector<tokenizer::Section>{{text, -1}} : impl_->raw_tokens.split(text);
  for (size_t i = 0; i < sections.size(); ++i) {
    const tokenizer::Section& section = sections[i];
    if (section.token >= 0) {
      ids.push_back(impl_->raw_tokens.token(section.token).id);
    } else if (!section.text.empty()) {
      OG_RETURN_IF_ERROR(impl_->encode_section(section.text, static_cast<int>(i), ids));
    }
  }
  if (impl_->post_processor) impl_->post_processor->process(ids, options.add_special_tokens);
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) return OG_ERROR("decode: token id ", id, " is outside the vocabulary (size ", vocab_size(), ")");
    const std::string_view token = impl_->vocab.token(id);
    if (options.skip_special_tokens && impl_->special_contents.contains(token)) continue;
    tokens.emplace_back(token);
  }
  std::string text;
  if (impl_->decoder) {
    impl_->decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  const std::string_view suffix = impl_->model->end_of_word_suffix();
  if (impl_->decoder && !suffix.empty()) {
    std::string replaced;
    size_t previous = 0;
    for (size_t hit = text.find(suffix); hit != std::string::npos; hit = text.find(suffix, previous)) {
      replaced.append(text, previous, hit - previous);
      replaced += ' ';
      previous = hit + suffix.size();
    }
    replaced.append(text, previous);
    text = options.skip_special_tokens ? std::string(tokenizer::js_trim_end(tokenizer::js_trim_start(replaced))) : replaced;
  }
  if (options.clean_up_tokenization_spaces.value_or(impl_->clean_up_tokenization_spaces)) {
    text = tokenizer::clean_up_tokenization(std::move(text));
  }
  return text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const auto raw = [&](std::vector<std::string> tokens) {
    std::string text;
    if (impl_->decoder) {
      impl_->raw_decoder->decode_chain(tokens);
      for (const std::string& t : tokens) text += t;
    } else {
      for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    }
    return text;
  };
  // Decoders treat a sequence's first token specially (Metaspace and Strip drop its leading
  // space), so the token is decoded after an anchor token and the anchor's text cut off.
  const std::string token(impl_->vocab.token(id));
  const std::string_view anchor = impl_->vocab.token(impl_->anchor_id);
  if (impl_->anchor_id >= 0 && anchor != token) {
    const std::string alone = raw({std::string(anchor)});
    std::string both = raw({std::string(anchor), token});
    if (both.compare(0, alone.size(), alone) == 0) return both.substr(alone.size());
  }
  return raw({token});
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const int32_t id = impl_->vocab.find(token);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

std::string_view Tokenizer::id_to_token(int32_t id) const {
  return impl_->vocab.token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special_ids.size() && impl_->special_ids[id];
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

namespace {

Status load_added_tokens(const Json& list, const tokenizer::Normalizer* normalizer, Tokenizer::Impl& impl) {
  if (list.is_null()) return Status::ok();
  if (!list.is_array()) return OG_ERROR("added_tokens: expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    OG_ASSIGN_OR_RETURN(tokenizer::AddedToken token, parse_added_token(list[i], i));
    OG_RETURN_IF_ERROR(impl.vocab.set(token.content, token.id));
    impl.added_contents.insert(token.content);
    if (token.special) {
      impl.special_contents.insert(token.content);
      if (impl.special_ids.size() <= static_cast<size_t>(token.id)) impl.special_ids.resize(token.id + 1);
      impl.special_ids[token.id] = true;
    }
    if (token.normalized && normalizer != nullptr) {
      OG_ASSIGN_OR_RETURN(std::string pattern, normalizer->normalize(token.content));
      impl.normalized_tokens.add(token, pattern);
    } else {
      impl.raw_tokens.add(token, token.content);
    }
  }
  return Status::ok();
}

void apply_config(const Json& config, Tokenizer::Impl& impl) {
  impl.clean_up_tokenization_spaces = tokenizer::json_bool_or(config, "clean_up_tokenization_spaces", true);
  if (auto extra = config.find("additional_special_tokens"); extra != config.end() && extra->is_array()) {
    for (const Json& token : *extra) {
      if (token.is_string()) impl.special_contents.insert(token.get<std::string>());
    }
  }
  auto id_of = [&](const char* key) -> std::optional<int32_t> {
    const auto token = config_token(config, key);
    if (!token) return std::nullopt;
    const int32_t id = impl.vocab.find(*token);
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  };
  impl.bos_id = id_of("bos_token");
  impl.eos_id = id_of("eos_token");
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  auto impl = std::make_unique<Impl>();
  // Everything but the model is small: parse it with nlohmann. The model is read in place.
  Json sections = Json::object();
  tokenizer::ModelMembers model_members;
  bool has_model = false;
  tokenizer::JsonReader reader(tokenizer_json);
  OG_RETURN_IF_ERROR(reader.read_object([&](const std::string& key) -> Status {
    if (key == "model") {
      has_model = true;
      return reader.read_object([&](const std::string& member) -> Status {
        OG_ASSIGN_OR_RETURN(model_members[member], reader.skip_value());
        return Status::ok();
      });
    }
    OG_ASSIGN_OR_RETURN(std::string_view raw, reader.skip_value());
    OG_ASSIGN_OR_RETURN(sections[key], parse_json(raw, "tokenizer.json field \"" + key + "\""));
    return Status::ok();
  }).with_context("tokenizer.json"));
  if (!has_model) return OG_ERROR("tokenizer.json: missing \"model\"");
  const auto field = [&](const char* key) -> const Json& {
    static const Json kNull;
    auto it = sections.find(key);
    return it == sections.end() ? kNull : *it;
  };

  OG_ASSIGN_OR_RETURN(impl->model, tokenizer::load_model(model_members, impl->vocab));
  // A model without tokens would encode every text to nothing, and a caller would go on with that.
  if (impl->vocab.size() == 0) return OG_ERROR("tokenizer.json: model.vocab is empty");
  OG_ASSIGN_OR_RETURN(impl->normalizer, tokenizer::create_normalizer(field("normalizer")));
  OG_RETURN_IF_ERROR(load_added_tokens(field("added_tokens"), impl->normalizer.get(), *impl));
  OG_ASSIGN_OR_RETURN(impl->pre_tokenizer, tokenizer::create_pre_tokenizer(field("pre_tokenizer")));
  OG_ASSIGN_OR_RETURN(impl->post_processor, tokenizer::create_post_processor(field("post_processor"), impl->vocab));
  tokenizer::DecoderContext context{&impl->added_contents};
  OG_ASSIGN_OR_RETURN(impl->decoder, tokenizer::create_decoder(field("decoder"), context));
  context.raw_bytes = true;
  OG_ASSIGN_OR_RETURN(impl->raw_decoder, tokenizer::create_decoder(field("decoder"), context));
  impl->special_ids.resize(impl->vocab.size());

  Json config = Json::object();
  if (!config_json.empty()) {
    OG_ASSIGN_OR_RETURN(config, parse_json(config_json, "tokenizer_config.json"));
    if (!config.is_object()) return OG_ERROR("tokenizer_config.json: expected an object");
  }
  apply_config(config, *impl);
  for (const char* letter : {"a", "e", "x"}) {
    if (impl->anchor_id < 0) impl->anchor_id = impl->vocab.find(letter);
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  const bool is_file = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const std::string dir = is_file ? path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1)
                                  : path + "/";
  const std::string json_path = is_file ? path : dir + "tokenizer.json";
  OG_ASSIGN_OR_RETURN(const std::string tokenizer_json, read_file(json_path));
  std::string config_json;
  std::error_code absent;
  if (std::filesystem::exists(dir + "tokenizer_config.json", absent)) {
    OG_ASSIGN_OR_RETURN(config_json, read_file(dir + "tokenizer_config.json"));
  }
  auto result = from_json(tokenizer_json, config_json);
  if (!result) return result.status().with_context(json_path);
  return result;
}

}  // namespace onnx_genai
