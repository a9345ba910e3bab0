// onnxruntime-genai's engine protocol (OgaEngine, OgaRequest) over genai::Engine.
//
// onnxruntime-genai hands out one ready request per OgaEngineStep: the requests that got tokens
// in a step queue up, and the model runs again only once that queue is empty. A request's tokens
// wait in it until the caller reads them (OgaRequestGetUnseenToken).
//
// Request handles are counted as onnxruntime-genai counts them: OgaCreateRequest gives one, each
// request OgaEngineStep returns is one more, OgaDestroyRequest releases one. A request stays in
// its engine until removed; when its last handle goes while it is still there, the engine aborts
// and frees it at once (onnxruntime-genai defers that to its next step, with the same effect).
//
// Threads: OgaEngineAddRequest, OgaEngineRemoveRequest and OgaDestroyRequest may come from other
// threads while one thread steps (the engine's bookkeeping is behind a mutex and genai::Engine
// queues adds and aborts for its step); a request's tokens are read on the stepping thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capi/search_options.h"
#include "onnx_genai/c_api.h"
#include "onnx_genai/engine.h"

namespace onnx_genai::capi {
class EngineBridge;
}  // namespace onnx_genai::capi

struct OgaRequest {
  const OgaModel* owner = nullptr;       // the params' model
  onnx_genai::capi::SearchOptions search;  // the params, copied
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;  // written by the engine's step
  size_t seen = 0;                 // generated tokens the caller has read
  bool done = false;
  void* opaque = nullptr;
  uint64_t id = 0;  // the engine's, once added (0: never added)
  std::atomic<int> handles{1};
  std::atomic<onnx_genai::capi::EngineBridge*> engine{nullptr};  // while added and not removed
};

namespace onnx_genai::capi {

class EngineBridge {
 public:
  // `owner` is the C handle requests must come from; the engine loads its own copy of the model
  // from `path` with `options` (paged attention rewrites the graph at load).
  static Result<std::unique_ptr<EngineBridge>> create(const OgaModel* owner, const std::string& path,
                                                      const genai::ModelOptions& options);
  // Aborts what runs; requests with handles left outlive it, detached.
  ~EngineBridge();
  EngineBridge(const EngineBridge&) = delete;
  EngineBridge& operator=(const EngineBridge&) = delete;

  Status add(OgaRequest& request);
  // A request not in any engine is a no-op, as in onnxruntime-genai.
  Status remove(OgaRequest& request);
  // A ready request with one more handle, or null when nothing is left to do.
  Result<OgaRequest*> step();
  bool has_pending() const;
  // One of the request's handles goes; the last one frees it (aborted first when it still runs).
  void release(OgaRequest& request);

 private:
  EngineBridge(const OgaModel* owner, std::unique_ptr<genai::Engine> engine)
      : owner_(owner), engine_(std::move(engine)) {}
  // Takes `request` out of the engine's books (under mutex_).
  void drop(OgaRequest& request);
  OgaRequest* hand_out();

  const OgaModel* owner_;
  std::unique_ptr<genai::Engine> engine_;
  mutable std::mutex mutex_;
  std::map<uint64_t, OgaRequest*> live_;  // added, not yet removed or freed
  std::deque<OgaRequest*> ready_;         // got tokens in the last step, not yet handed out
};

}  // namespace onnx_genai::capi
