#include "server/serving_loop.h"

#include <cstdio>
#include <utility>

namespace onnx_genai::server {

std::optional<genai::RequestOutput> Mailbox::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !outputs_.empty() || error_ || open_ == 0; });
  if (outputs_.empty()) return std::nullopt;
  genai::RequestOutput out = std::move(outputs_.front());
  outputs_.pop_front();
  return out;
}

std::optional<std::string> Mailbox::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Mailbox::expect() {
  std::lock_guard lock(mutex_);
  ++open_;
}

void Mailbox::push(genai::RequestOutput output) {
  {
    std::lock_guard lock(mutex_);
    if (output.finished) --open_;
    outputs_.push_back(std::move(output));
  }
  ready_.notify_all();
}

void Mailbox::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    error_ = message;
  }
  ready_.notify_all();
}

ServingLoop::ServingLoop(std::unique_ptr<genai::Engine> engine, int64_t max_requests,
                         genai::SpeculativeParams speculative)
    : engine_(std::move(engine)), max_requests_(max_requests), speculative_(speculative), stats_(engine_->stats()) {
  thread_ = std::thread([this] { run(); });
}

ServingLoop::~ServingLoop() {
  abort_all();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

bool ServingLoop::has_room(int64_t count) const {
  std::lock_guard lock(mutex_);
  return in_flight_ + count <= max_requests_;
}

int64_t ServingLoop::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

Result<uint64_t> ServingLoop::submit(std::vector<int32_t> prompt, const genai::RequestParams& params,
                                     const std::shared_ptr<Mailbox>& mailbox) {
  genai::RequestParams speculating = params;
  if (speculative_.method != genai::SpeculativeMethod::kNone) speculating.speculative = speculative_;
  speculating.speculative.fast_forward = speculative_.fast_forward && params.constraint.has_value();
  OG_ASSIGN_OR_RETURN(const uint64_t id, engine_->add_request(std::move(prompt), speculating));
  mailbox->expect();
  {
    std::lock_guard lock(mutex_);
    bool finished = false;
    if (auto it = orphans_.find(id); it != orphans_.end()) {
      for (genai::RequestOutput& out : it->second) {
        finished = finished || out.finished;
        mailbox->push(std::move(out));
      }
      orphans_.erase(it);
    }
    if (!finished) {
      mailboxes_.emplace(id, mailbox);
      ++in_flight_;
    }
    wake_ = true;
  }
  work_.notify_all();
  return id;
}

void ServingLoop::abort(uint64_t id) {
  engine_->abort(id);
  {
    std::lock_guard lock(mutex_);
    wake_ = true;
  }
  work_.notify_all();
}

void ServingLoop::abort_all() {
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, mailbox] : mailboxes_) engine_->abort(id);
    wake_ = true;
  }
  work_.notify_all();
}

genai::EngineStats ServingLoop::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void ServingLoop::deliver(std::vector<genai::RequestOutput>& outputs) {
  std::lock_guard lock(mutex_);
  for (genai::RequestOutput& out : outputs) {
    const uint64_t id = out.id;
    const bool finished = out.finished;
    if (discarded_.count(id)) {
      if (finished) discarded_.erase(id);
      continue;
    }
    auto it = mailboxes_.find(id);
    if (it == mailboxes_.end()) {
      orphans_[id].push_back(std::move(out));
      continue;
    }
    it->second->push(std::move(out));
    if (finished) {
      mailboxes_.erase(it);
      --in_flight_;
    }
  }
  stats_ = engine_->stats();
}

// A failed step leaves the engine's requests in an unknown state: each one fails with the
// message and is aborted, and the loop goes on serving new requests.
void ServingLoop::fail_all(const std::string& message) {
  std::fprintf(stderr, "onnx-genai serve: engine step failed: %s\n", message.c_str());
  std::lock_guard lock(mutex_);
  for (const auto& [id, mailbox] : mailboxes_) {
    engine_->abort(id);
    mailbox->fail(message);
    discarded_.insert(id);
  }
  in_flight_ -= static_cast<int64_t>(mailboxes_.size());
  mailboxes_.clear();
  orphans_.clear();
}

void ServingLoop::run() {
  for (;;) {
    if (engine_->has_work()) {
      Result<std::vector<genai::RequestOutput>> outputs = engine_->step();
      if (outputs.is_ok()) {
        deliver(*outputs);
      } else {
        fail_all(outputs.status().message());
      }
      continue;
    }
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    work_.wait(lock, [&] { return wake_ || stopping_; });
    wake_ = false;
  }
}

}  // namespace onnx_genai::server
