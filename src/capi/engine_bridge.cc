// onnxruntime-genai's engine protocol over genai::Engine (see engine_bridge.h).
#include "capi/engine_bridge.h"

#include <algorithm>

namespace onnx_genai::capi {

Result<std::unique_ptr<EngineBridge>> EngineBridge::create(const OgaModel* owner, const std::string& path,
                                                           const genai::ModelOptions& options) {
  genai::EngineOptions engine_options;
  engine_options.model = options;
  OG_ASSIGN_OR_RETURN(std::unique_ptr<genai::Engine> engine, genai::Engine::load(path, engine_options));
  // As `serve` does: the first requests should not wait for plans to compile.
  OG_RETURN_IF_ERROR(engine->warm_up().status());
  return std::unique_ptr<EngineBridge>(new EngineBridge(owner, std::move(engine)));
}

EngineBridge::~EngineBridge() {
  std::lock_guard lock(mutex_);
  for (auto& [id, request] : live_) {
    request->engine = nullptr;
    if (request->handles == 0) delete request;
  }
}

Status EngineBridge::add(OgaRequest& request) {
  if (request.owner != owner_) return OG_ERROR("the request's params were made for another model than the engine's");
  if (request.id != 0) return OG_ERROR("the request was already added to an engine (a request runs once)");
  if (request.prompt.empty()) return OG_ERROR("the request has no tokens (OgaRequestAddTokens first)");
  OG_ASSIGN_OR_RETURN(const genai::RequestParams params, request_params(request.search, request.prompt));
  // Held across add_request: a step running meanwhile may already report the new id, and it must
  // find the request in live_ when it takes the lock.
  std::lock_guard lock(mutex_);
  OG_ASSIGN_OR_RETURN(request.id, engine_->add_request(request.prompt, params));
  request.engine = this;
  live_.emplace(request.id, &request);
  return Status::ok();
}

void EngineBridge::drop(OgaRequest& request) {
  if (!request.done) engine_->abort(request.id);
  live_.erase(request.id);
  std::erase(ready_, &request);
  request.engine = nullptr;
}

Status EngineBridge::remove(OgaRequest& request) {
  std::lock_guard lock(mutex_);
  EngineBridge* engine = request.engine;
  if (engine == nullptr) return Status::ok();
  if (engine != this) return OG_ERROR("the request belongs to another engine");
  drop(request);
  return Status::ok();
}

void EngineBridge::release(OgaRequest& request) {
  std::lock_guard lock(mutex_);
  if (--request.handles > 0) return;
  if (request.engine == this) drop(request);
  delete &request;
}

OgaRequest* EngineBridge::hand_out() {
  OgaRequest* request = ready_.front();
  ready_.pop_front();
  ++request->handles;
  return request;
}

Result<OgaRequest*> EngineBridge::step() {
  {
    std::lock_guard lock(mutex_);
    if (!ready_.empty()) return hand_out();
  }
  // A step may leave every request without a token (a chunk of a long prompt): step again, since
  // a null request tells the caller's loop that everything is done.
  while (engine_->has_work()) {
    OG_ASSIGN_OR_RETURN(const std::vector<genai::RequestOutput> outputs, engine_->step());
    std::lock_guard lock(mutex_);
    for (const genai::RequestOutput& out : outputs) {
      const auto it = live_.find(out.id);
      if (it == live_.end()) continue;  // removed or freed while the step ran
      OgaRequest& request = *it->second;
      request.generated.insert(request.generated.end(), out.new_tokens.begin(), out.new_tokens.end());
      request.done = out.finished;
      if (!out.new_tokens.empty() || out.finished) ready_.push_back(&request);
    }
    if (!ready_.empty()) return hand_out();
  }
  return nullptr;
}

bool EngineBridge::has_pending() const {
  {
    std::lock_guard lock(mutex_);
    if (!ready_.empty()) return true;
  }
  return engine_->has_work();
}

}  // namespace onnx_genai::capi
