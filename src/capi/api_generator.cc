// C API: generator params and generator.
#include "capi/api_objects.h"
#include "genai/constraint_processor.h"
#include "genai/model_parts.h"

using onnx_genai::Status;
using onnx_genai::capi::guard;
using onnx_genai::capi::require;

extern "C" {

OgaResult* OgaCreateGeneratorParams(const OgaModel* model, OgaGeneratorParams** out) {
  return guard("OgaCreateGeneratorParams", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    auto params = std::make_unique<OgaGeneratorParams>();
    params->owner = model;
    params->search = onnx_genai::capi::search_defaults(*model->model);
    for (const auto& [key, value] : model->search_overlay.items()) {
      OG_RETURN_IF_ERROR(onnx_genai::capi::set_search_value(params->search, key, value));
    }
    *out = params.release();
    return Status::ok();
  });
}

void OgaDestroyGeneratorParams(OgaGeneratorParams* params) { delete params; }

OgaResult* OgaGeneratorParamsSetSearchNumber(OgaGeneratorParams* params, const char* name, double value) {
  return guard("OgaGeneratorParamsSetSearchNumber", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(name, "name"));
    return onnx_genai::capi::set_search_number(params->search, name, value);
  });
}

OgaResult* OgaGeneratorParamsSetSearchBool(OgaGeneratorParams* params, const char* name, bool value) {
  return guard("OgaGeneratorParamsSetSearchBool", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(name, "name"));
    return onnx_genai::capi::set_search_bool(params->search, name, value);
  });
}

OgaResult* OgaGeneratorParamsGetSearchNumber(const OgaGeneratorParams* params, const char* name, double* out) {
  return guard("OgaGeneratorParamsGetSearchNumber", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(name, "name"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    OG_ASSIGN_OR_RETURN(*out, onnx_genai::capi::get_search_number(params->search, name));
    return Status::ok();
  });
}

OgaResult* OgaGeneratorParamsGetSearchBool(const OgaGeneratorParams* params, const char* name, bool* out) {
  return guard("OgaGeneratorParamsGetSearchBool", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(name, "name"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    OG_ASSIGN_OR_RETURN(*out, onnx_genai::capi::get_search_bool(params->search, name));
    return Status::ok();
  });
}

OgaResult* OgaGeneratorParamsSetGuidance(OgaGeneratorParams* params, const char* type, const char* data,
                                         bool /*enable_ff_tokens: no fast-forward path; the text is the same*/) {
  return guard("OgaGeneratorParamsSetGuidance", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(type, "type"));
    OG_RETURN_IF_ERROR(require(data, "data"));
    OG_ASSIGN_OR_RETURN(std::optional<onnx_genai::ConstraintSpec> spec, onnx_genai::capi::guidance_constraint(type, data));
    // Compiled now so that a bad schema fails at the call that gave it; each generator compiles
    // its own copy when it starts.
    const auto& parts = onnx_genai::genai::ModelAccess::parts(*params->owner->model);
    OG_RETURN_IF_ERROR(onnx_genai::genai::compile_constraint(parts, spec).status());
    params->search.constraint = std::move(spec);
    return Status::ok();
  });
}

OgaResult* OgaCreateGenerator(const OgaModel* model, const OgaGeneratorParams* params, OgaGenerator** out) {
  return guard("OgaCreateGenerator", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (params->owner != model) return OG_ERROR("the params were made for another model");
    // Checked now rather than at the first append: beam search settings fail here.
    OG_RETURN_IF_ERROR(onnx_genai::capi::generator_params(params->search, {}).status());
    *out = new OgaGenerator(onnx_genai::capi::GeneratorBridge(*model->model, params->search));
    return Status::ok();
  });
}

void OgaDestroyGenerator(OgaGenerator* generator) { delete generator; }

bool OgaGenerator_IsDone(const OgaGenerator* generator) { return generator != nullptr && generator->bridge.is_done(); }

OgaResult* OgaGenerator_AppendTokens(OgaGenerator* generator, const int32_t* input_ids, size_t input_ids_count) {
  return guard("OgaGenerator_AppendTokens", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    if (input_ids_count > 0) OG_RETURN_IF_ERROR(require(input_ids, "input_ids"));
    return generator->bridge.append_tokens(std::span<const int32_t>(input_ids, input_ids_count));
  });
}

OgaResult* OgaGenerator_AppendTokenSequences(OgaGenerator* generator, const OgaSequences* sequences) {
  return guard("OgaGenerator_AppendTokenSequences", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    OG_RETURN_IF_ERROR(require(sequences, "sequences"));
    return generator->bridge.append_sequences(sequences->rows);
  });
}

OgaResult* OgaGenerator_GenerateNextToken(OgaGenerator* generator) {
  return guard("OgaGenerator_GenerateNextToken", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    return generator->bridge.generate_next_token();
  });
}

OgaResult* OgaGenerator_GetNextTokens(const OgaGenerator* generator, const int32_t** out, size_t* out_count) {
  return guard("OgaGenerator_GetNextTokens", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    OG_RETURN_IF_ERROR(require(out_count, "out_count"));
    const std::span<const int32_t> tokens = generator->bridge.next_tokens();
    *out = tokens.data();
    *out_count = tokens.size();
    return Status::ok();
  });
}

OgaResult* OgaGenerator_RewindTo(OgaGenerator* generator, size_t new_length) {
  return guard("OgaGenerator_RewindTo", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    return generator->bridge.rewind_to(new_length);
  });
}

OgaResult* OgaGenerator_GetLogits(OgaGenerator* generator, OgaTensor** out) {
  return guard("OgaGenerator_GetLogits", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    OG_ASSIGN_OR_RETURN(const std::span<const float> rows, generator->bridge.logits());
    auto tensor = std::make_unique<OgaTensor>();
    tensor->type = OgaElementType_float32;
    tensor->shape = {static_cast<int64_t>(generator->bridge.batch_size()), 1,
                     static_cast<int64_t>(generator->bridge.vocab_size())};
    tensor->owned.resize(rows.size_bytes());
    std::memcpy(tensor->owned.data(), rows.data(), rows.size_bytes());
    tensor->data = tensor->owned.data();
    *out = tensor.release();
    return Status::ok();
  });
}

OgaResult* OgaGenerator_SetLogits(OgaGenerator* generator, OgaTensor* tensor) {
  return guard("OgaGenerator_SetLogits", [&] {
    OG_RETURN_IF_ERROR(require(generator, "generator"));
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    if (tensor->type != OgaElementType_float32) return OG_ERROR("logits must be a float32 tensor");
    return generator->bridge.set_logits(std::span<const float>(static_cast<const float*>(tensor->data), tensor->elements()));
  });
}

size_t OgaGenerator_GetSequenceCount(const OgaGenerator* generator, size_t index) {
  return generator != nullptr ? generator->bridge.sequence(index).size() : 0;
}

const int32_t* OgaGenerator_GetSequenceData(const OgaGenerator* generator, size_t index) {
  if (generator == nullptr) return nullptr;
  const std::span<const int32_t> tokens = generator->bridge.sequence(index);
  return tokens.empty() ? nullptr : tokens.data();
}

size_t OgaGenerator_TokenCount(const OgaGenerator* generator) {
  return generator != nullptr ? generator->bridge.token_count() : 0;
}

}  // extern "C"
