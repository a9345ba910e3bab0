// C API: tokenizer, chat templates and token streams.
#include <algorithm>

#include "capi/api_objects.h"

using onnx_genai::Result;
using onnx_genai::Status;
using onnx_genai::capi::copy_string;
using onnx_genai::capi::guard;
using onnx_genai::capi::require;

namespace {

const onnx_genai::DecodeOptions kDecode{.skip_special_tokens = true};

Result<const onnx_genai::ChatTemplates*> chat_templates(const OgaTokenizer& tokenizer) {
  if (!tokenizer.templates) tokenizer.templates.emplace(onnx_genai::ChatTemplates::load(tokenizer.owner->dir));
  if (!tokenizer.templates->is_ok()) return tokenizer.templates->status();
  return &tokenizer.templates->value();
}

Result<std::string> apply_chat_template(const OgaTokenizer& tokenizer, const char* template_str, const char* messages,
                                        const char* tools, bool add_generation_prompt) {
  onnx_genai::ChatRequest request;
  request.messages_json = messages;
  if (tools != nullptr) request.tools_json = tools;
  request.add_generation_prompt = add_generation_prompt;
  if (template_str == nullptr) {
    OG_ASSIGN_OR_RETURN(const onnx_genai::ChatTemplates* templates, chat_templates(tokenizer));
    return templates->apply(request);
  }
  // The caller's template gets the package's special tokens (bos_token...) when it has them.
  Result<const onnx_genai::ChatTemplates*> package = chat_templates(tokenizer);
  std::vector<std::pair<std::string, std::string>> specials;
  if (package.is_ok()) specials = (*package)->special_tokens();
  OG_ASSIGN_OR_RETURN(const onnx_genai::ChatTemplates custom,
                      onnx_genai::ChatTemplates::from_source(template_str, std::move(specials)));
  return custom.apply(request);
}

// Row `row` of an int32 or int64 tensor [rows, length] as int32 ids.
Result<std::vector<int32_t>> tensor_row(const OgaTensor& tensor, size_t row) {
  const size_t length = static_cast<size_t>(tensor.shape[1]);
  std::vector<int32_t> ids(length);
  for (size_t i = 0; i < length; ++i) {
    const size_t at = row * length + i;
    const int64_t id = tensor.type == OgaElementType_int32 ? static_cast<const int32_t*>(tensor.data)[at]
                                                           : static_cast<const int64_t*>(tensor.data)[at];
    if (id < INT32_MIN || id > INT32_MAX) return OG_ERROR("token ", id, " at [", row, ", ", i, "] is not a token id");
    ids[i] = static_cast<int32_t>(id);
  }
  return ids;
}

}  // namespace

extern "C" {

OgaResult* OgaCreateTokenizer(const OgaModel* model, OgaTokenizer** out) {
  return guard("OgaCreateTokenizer", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    const onnx_genai::Tokenizer* tokenizer = model->model->tokenizer();
    if (tokenizer == nullptr) return OG_ERROR(model->dir, ": the model has no tokenizer.json");
    *out = new OgaTokenizer{model, tokenizer, {}};
    return Status::ok();
  });
}

void OgaDestroyTokenizer(OgaTokenizer* tokenizer) { delete tokenizer; }

OgaResult* OgaTokenizerEncode(const OgaTokenizer* tokenizer, const char* str, OgaSequences* sequences) {
  return guard("OgaTokenizerEncode", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(str, "str"));
    OG_RETURN_IF_ERROR(require(sequences, "sequences"));
    OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->tokenizer->encode(str));
    sequences->rows.push_back(std::move(ids));
    return Status::ok();
  });
}

OgaResult* OgaTokenizerEncodeBatch(const OgaTokenizer* tokenizer, const char** strings, size_t count, OgaTensor** out) {
  return guard("OgaTokenizerEncodeBatch", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(strings, "strings"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (count == 0) return OG_ERROR("no strings");
    std::vector<std::vector<int32_t>> rows;
    size_t longest = 0;
    for (size_t i = 0; i < count; ++i) {
      if (strings[i] == nullptr) return OG_ERROR("string ", i, " is NULL");
      OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->tokenizer->encode(strings[i]));
      longest = std::max(longest, ids.size());
      rows.push_back(std::move(ids));
    }
    auto tensor = std::make_unique<OgaTensor>();
    tensor->type = OgaElementType_int32;
    tensor->shape = {static_cast<int64_t>(count), static_cast<int64_t>(longest)};
    tensor->owned.resize(count * longest * sizeof(int32_t));
    tensor->data = tensor->owned.data();
    auto* data = static_cast<int32_t*>(tensor->data);
    std::fill(data, data + count * longest, tokenizer->owner->model->info().pad_token_id);
    for (size_t i = 0; i < count; ++i) std::copy(rows[i].begin(), rows[i].end(), data + i * longest);
    *out = tensor.release();
    return Status::ok();
  });
}

OgaResult* OgaTokenizerDecodeBatch(const OgaTokenizer* tokenizer, const OgaTensor* tensor, OgaStringArray** out) {
  return guard("OgaTokenizerDecodeBatch", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (tensor->shape.size() != 2 || (tensor->type != OgaElementType_int32 && tensor->type != OgaElementType_int64)) {
      return OG_ERROR("tokens must be an int32 or int64 tensor [rows, length]");
    }
    auto strings = std::make_unique<OgaStringArray>();
    for (size_t row = 0; row < static_cast<size_t>(tensor->shape[0]); ++row) {
      OG_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tensor_row(*tensor, row));
      OG_ASSIGN_OR_RETURN(std::string text, tokenizer->tokenizer->decode(ids, kDecode));
      strings->strings.push_back(std::move(text));
    }
    *out = strings.release();
    return Status::ok();
  });
}

OgaResult* OgaTokenizerToTokenId(const OgaTokenizer* tokenizer, const char* str, int32_t* token_id) {
  return guard("OgaTokenizerToTokenId", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(str, "str"));
    OG_RETURN_IF_ERROR(require(token_id, "token_id"));
    const std::optional<int32_t> id = tokenizer->tokenizer->token_to_id(str);
    if (!id) return OG_ERROR("'", str, "' is not a token of the vocabulary");
    *token_id = *id;
    return Status::ok();
  });
}

OgaResult* OgaTokenizerDecode(const OgaTokenizer* tokenizer, const int32_t* tokens, size_t token_count,
                              const char** out_string) {
  return guard("OgaTokenizerDecode", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(out_string, "out_string"));
    if (token_count > 0) OG_RETURN_IF_ERROR(require(tokens, "tokens"));
    OG_ASSIGN_OR_RETURN(const std::string text,
                        tokenizer->tokenizer->decode(std::span<const int32_t>(tokens, token_count), kDecode));
    *out_string = copy_string(text);
    return Status::ok();
  });
}

OgaResult* OgaTokenizerApplyChatTemplate(const OgaTokenizer* tokenizer, const char* template_str, const char* messages,
                                         const char* tools, bool add_generation_prompt, const char** out_string) {
  return guard("OgaTokenizerApplyChatTemplate", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(messages, "messages"));
    OG_RETURN_IF_ERROR(require(out_string, "out_string"));
    OG_ASSIGN_OR_RETURN(const std::string text,
                        apply_chat_template(*tokenizer, template_str, messages, tools, add_generation_prompt));
    *out_string = copy_string(text);
    return Status::ok();
  });
}

OgaResult* OgaTokenizerGetBosTokenId(const OgaTokenizer* tokenizer, int32_t* token_id) {
  return guard("OgaTokenizerGetBosTokenId", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(token_id, "token_id"));
    *token_id = tokenizer->tokenizer->bos_token_id().value_or(-1);
    return Status::ok();
  });
}

OgaResult* OgaTokenizerGetEosTokenIds(const OgaTokenizer* tokenizer, const int32_t** eos_token_ids,
                                      size_t* token_count) {
  return guard("OgaTokenizerGetEosTokenIds", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(eos_token_ids, "eos_token_ids"));
    OG_RETURN_IF_ERROR(require(token_count, "token_count"));
    const std::vector<int32_t>& eos = tokenizer->owner->model->info().eos_token_ids;
    *eos_token_ids = eos.data();
    *token_count = eos.size();
    return Status::ok();
  });
}

OgaResult* OgaTokenizerGetPadTokenId(const OgaTokenizer* tokenizer, int32_t* token_id) {
  return guard("OgaTokenizerGetPadTokenId", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(token_id, "token_id"));
    *token_id = tokenizer->owner->model->info().pad_token_id;
    return Status::ok();
  });
}

OgaResult* OgaCreateTokenizerStream(const OgaTokenizer* tokenizer, OgaTokenizerStream** out) {
  return guard("OgaCreateTokenizerStream", [&] {
    OG_RETURN_IF_ERROR(require(tokenizer, "tokenizer"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = new OgaTokenizerStream(*tokenizer->tokenizer);
    return Status::ok();
  });
}

void OgaDestroyTokenizerStream(OgaTokenizerStream* stream) { delete stream; }

OgaResult* OgaTokenizerStreamDecode(OgaTokenizerStream* stream, int32_t token, const char** out) {
  return guard("OgaTokenizerStreamDecode", [&] {
    OG_RETURN_IF_ERROR(require(stream, "stream"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    OG_ASSIGN_OR_RETURN(stream->last, stream->detokenizer.put(token));
    *out = stream->last.c_str();
    return Status::ok();
  });
}

}  // extern "C"
