// C API: the engine and its requests (the protocol is in engine_bridge.h).
#include "capi/api_objects.h"

using onnx_genai::Status;
using onnx_genai::capi::guard;
using onnx_genai::capi::require;

namespace {

// Engine calls on a request need both handles.
Status require_both(const OgaEngine* engine, const OgaRequest* request) {
  OG_RETURN_IF_ERROR(require(engine, "engine"));
  return require(request, "request");
}

OgaResult* request_done(const char* function, const OgaRequest* request, bool* out) {
  return guard(function, [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = request->done;
    return Status::ok();
  });
}

}  // namespace

extern "C" {

OgaResult* OgaCreateEngine(OgaModel* model, OgaEngine** out) {
  return guard("OgaCreateEngine", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    auto engine = std::make_unique<OgaEngine>();
    OG_ASSIGN_OR_RETURN(engine->bridge, onnx_genai::capi::EngineBridge::create(model, model->path, model->options));
    *out = engine.release();
    return Status::ok();
  });
}

void OgaDestroyEngine(OgaEngine* engine) { delete engine; }

OgaResult* OgaEngineStep(OgaEngine* engine, OgaRequest** request) {
  return guard("OgaEngineStep", [&] {
    OG_RETURN_IF_ERROR(require(engine, "engine"));
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_ASSIGN_OR_RETURN(*request, engine->bridge->step());
    return Status::ok();
  });
}

OgaResult* OgaEngineHasPendingRequests(OgaEngine* engine, bool* out) {
  return guard("OgaEngineHasPendingRequests", [&] {
    OG_RETURN_IF_ERROR(require(engine, "engine"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = engine->bridge->has_pending();
    return Status::ok();
  });
}

OgaResult* OgaEngineAddRequest(OgaEngine* engine, OgaRequest* request) {
  return guard("OgaEngineAddRequest", [&] {
    OG_RETURN_IF_ERROR(require_both(engine, request));
    return engine->bridge->add(*request);
  });
}

OgaResult* OgaEngineRemoveRequest(OgaEngine* engine, OgaRequest* request) {
  return guard("OgaEngineRemoveRequest", [&] {
    OG_RETURN_IF_ERROR(require_both(engine, request));
    return engine->bridge->remove(*request);
  });
}

OgaResult* OgaCreateRequest(OgaGeneratorParams* params, OgaRequest** out) {
  return guard("OgaCreateRequest", [&] {
    OG_RETURN_IF_ERROR(require(params, "params"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    auto request = std::make_unique<OgaRequest>();
    request->owner = params->owner;
    request->search = params->search;
    *out = request.release();
    return Status::ok();
  });
}

OgaResult* OgaRequestAddTokens(OgaRequest* request, const OgaSequences* tokens) {
  return guard("OgaRequestAddTokens", [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_RETURN_IF_ERROR(require(tokens, "tokens"));
    if (tokens->rows.size() != 1) return OG_ERROR("a request takes one sequence, got ", tokens->rows.size());
    if (tokens->rows[0].empty()) return OG_ERROR("the sequence has no tokens");
    if (request->id != 0) {
      return OG_ERROR("tokens are added before the request is added to an engine (another turn on a request is not "
                      "supported)");
    }
    request->prompt.insert(request->prompt.end(), tokens->rows[0].begin(), tokens->rows[0].end());
    return Status::ok();
  });
}

void OgaDestroyRequest(OgaRequest* request) {
  if (request == nullptr) return;
  if (onnx_genai::capi::EngineBridge* engine = request->engine) {
    engine->release(*request);
  } else if (--request->handles == 0) {
    delete request;
  }
}

OgaResult* OgaRequestSetOpaqueData(OgaRequest* request, void* opaque_data) {
  return guard("OgaRequestSetOpaqueData", [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    request->opaque = opaque_data;
    return Status::ok();
  });
}

OgaResult* OgaRequestGetOpaqueData(OgaRequest* request, void** opaque_data) {
  return guard("OgaRequestGetOpaqueData", [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_RETURN_IF_ERROR(require(opaque_data, "opaque_data"));
    *opaque_data = request->opaque;
    return Status::ok();
  });
}

OgaResult* OgaRequestHasUnseenTokens(const OgaRequest* request, bool* out) {
  return guard("OgaRequestHasUnseenTokens", [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = request->seen < request->generated.size();
    return Status::ok();
  });
}

OgaResult* OgaRequestGetUnseenToken(OgaRequest* request, int32_t* out) {
  return guard("OgaRequestGetUnseenToken", [&] {
    OG_RETURN_IF_ERROR(require(request, "request"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (request->seen == request->generated.size()) {
      return OG_ERROR("no unseen tokens (all ", request->generated.size(), " generated tokens were read)");
    }
    *out = request->generated[request->seen++];
    return Status::ok();
  });
}

OgaResult* OgaRequestIsDone(const OgaRequest* request, bool* out) {
  return request_done("OgaRequestIsDone", request, out);
}

// onnxruntime-genai's main branch's name for IsDone; a request here has one turn.
OgaResult* OgaRequestIsTurnComplete(const OgaRequest* request, bool* out) {
  return request_done("OgaRequestIsTurnComplete", request, out);
}

}  // extern "C"
