#include "server/job_runner.h"

#include <algorithm>
#include <cstdio>

namespace onnx_genai::server {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

JobRunner::JobRunner(ServingLoop& loop, GenerationJob job, std::string model_name)
    : loop_(loop),
      job_(std::move(job)),
      builder_(job_, std::move(model_name), loop.model().tokenizer()),
      choices_(job_.choices()),
      timing_(job_.choices()) {}

JobRunner::~JobRunner() { abort(); }

std::optional<ApiError> JobRunner::start() {
  for (size_t i = 0; i < job_.choices(); ++i) {
    Result<uint64_t> id = loop_.submit(job_.prompts[i / static_cast<size_t>(job_.n)], job_.choice_params(i), mailbox_);
    if (!id) {
      abort();
      return ApiError{400, id.status().message()};
    }
    ids_.push_back(*id);
    choices_[i].prompt_tokens = static_cast<int64_t>(job_.prompts[i / static_cast<size_t>(job_.n)].size());
    timing_[i].last = start_;
  }
  return std::nullopt;
}

std::optional<JobRunner::Update> JobRunner::poll(std::chrono::milliseconds timeout) {
  std::optional<genai::RequestOutput> out = mailbox_->next(timeout);
  if (!out) return std::nullopt;
  const auto it = std::find(ids_.begin(), ids_.end(), out->id);
  const auto choice = static_cast<size_t>(it - ids_.begin());
  ChoiceState& c = choices_[choice];
  Timing& t = timing_[choice];
  const Clock::time_point now = Clock::now();
  if (out->queue_seconds) t.queue = *out->queue_seconds;
  if (!out->new_tokens.empty()) {
    if (t.ttft < 0) {
      t.ttft = seconds(now - start_);
    } else {
      t.gaps.push_back(seconds(now - t.last));
    }
    t.last = now;
  }
  c.text += out->new_text;
  c.logprobs.insert(c.logprobs.end(), out->logprobs.begin(), out->logprobs.end());
  c.generated_tokens = out->generated_tokens;
  c.prompt_tokens = out->prompt_tokens;
  if (out->finished) {
    c.reason = out->reason;
    ++finished_;
  }
  return Update{choice, std::move(*out)};
}

bool JobRunner::done() const { return finished_ == ids_.size() || mailbox_->error(); }

void JobRunner::abort() {
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (choices_[i].reason == genai::FinishReason::kNone) loop_.abort(ids_[i]);
  }
}

void JobRunner::finish(Metrics& metrics, int http_status, const std::string& route) {
  if (finished_logged_) return;
  finished_logged_ = true;
  const double duration = seconds(Clock::now() - start_);
  const std::optional<std::string> failed = error();
  double ttft = -1;
  for (size_t i = 0; i < ids_.size(); ++i) {
    RequestRecord r;
    r.prompt_tokens = choices_[i].prompt_tokens;
    r.generation_tokens = choices_[i].generated_tokens;
    r.queue_seconds = timing_[i].queue;
    r.ttft_seconds = timing_[i].ttft;
    r.inter_token = std::move(timing_[i].gaps);
    r.e2e_seconds = seconds(timing_[i].last - start_);
    r.finish_reason = failed ? "error" : finish_reason_json(choices_[i].reason).is_null()
                                             ? "abort"
                                             : finish_reason_json(choices_[i].reason).get<std::string>();
    metrics.record(r);
    if (r.ttft_seconds >= 0 && (ttft < 0 || r.ttft_seconds < ttft)) ttft = r.ttft_seconds;
  }
  const Usage usage = total_usage(job_, choices_);
  std::fprintf(stderr, "onnx-genai serve: %s %s %d choices=%zu prompt_tokens=%lld completion_tokens=%lld ttft=%.3fs duration=%.3fs%s%s\n",
               builder_.id().c_str(), route.c_str(), http_status, ids_.size(), static_cast<long long>(usage.prompt_tokens),
               static_cast<long long>(usage.completion_tokens), std::max(ttft, 0.0), duration, failed ? " error=" : "",
               failed ? failed->c_str() : "");
}

}  // namespace onnx_genai::server
