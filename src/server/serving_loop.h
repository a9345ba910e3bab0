// The engine's stepping thread, and the HTTP handlers' side of it: a handler submits a request and
// reads that request's outputs, in order, from its Mailbox; one thread steps the engine
// whenever any request is queued or running, and sleeps otherwise.
//
// Outputs are routed by request id under one mutex. A step may report a request before submit()
// has registered its stream (add_request returns, the loop steps, then registration): such
// outputs wait in an orphan list that registration drains, so none is lost.

#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "onnx_genai/engine.h"

namespace onnx_genai::server {

using Clock = std::chrono::steady_clock;

// The outputs of one or more requests (the choices of one HTTP request), in the order steps
// produced them.
class Mailbox {
 public:
  // The next output, waiting at most `timeout`; nullopt when none came, and at once when every
  // request has finished and its outputs were taken (or the engine failed, see error()).
  std::optional<genai::RequestOutput> next(std::chrono::milliseconds timeout);
  // Set when the engine failed while a request of this mailbox was in it; nothing follows.
  std::optional<std::string> error() const;

 private:
  friend class ServingLoop;
  void expect();  // one more request delivers here
  void push(genai::RequestOutput output);
  void fail(const std::string& message);

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<genai::RequestOutput> outputs_;
  std::optional<std::string> error_;
  int64_t open_ = 0;  // requests that have not delivered their finishing output
};

class ServingLoop {
 public:
  // `max_requests`: requests queued or running at once; submit() refuses more (has_room()).
  // `speculative`: the server's speculative decoding, given to every request; its fast_forward
  // goes to the requests with a constraint (response_format, a forced tool call) only.
  ServingLoop(std::unique_ptr<genai::Engine> engine, int64_t max_requests, genai::SpeculativeParams speculative = {});
  ~ServingLoop();  // aborts what is left and joins the thread
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  const genai::Model& model() const { return engine_->model(); }
  // Whether `count` more requests fit under max_requests.
  bool has_room(int64_t count) const;
  // Queues a request whose outputs go to `mailbox`; fails as Engine::add_request does (the
  // message is the engine's).
  Result<uint64_t> submit(std::vector<int32_t> prompt, const genai::RequestParams& params,
                          const std::shared_ptr<Mailbox>& mailbox);
  // Ends the request at the next step (its mailbox gets the aborted output); unknown ids are ignored.
  void abort(uint64_t id);
  // Aborts every request in flight (the drain deadline of a shutdown).
  void abort_all();
  // The engine's counters after the latest step.
  genai::EngineStats stats() const;
  int64_t in_flight() const;

 private:
  void run();
  void deliver(std::vector<genai::RequestOutput>& outputs);
  void fail_all(const std::string& message);

  std::unique_ptr<genai::Engine> engine_;
  const int64_t max_requests_;
  const genai::SpeculativeParams speculative_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::map<uint64_t, std::shared_ptr<Mailbox>> mailboxes_;
  std::map<uint64_t, std::vector<genai::RequestOutput>> orphans_;
  std::set<uint64_t> discarded_;  // failed by fail_all(): their last outputs are dropped
  int64_t in_flight_ = 0;  // submitted and not yet finished
  bool wake_ = false;      // a submit or abort since the loop last found no work
  bool stopping_ = false;
  genai::EngineStats stats_;
  std::thread thread_;
};

}  // namespace onnx_genai::server
