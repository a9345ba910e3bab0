// One OpenAI generation request on the serving loop: its choices submitted as engine requests,
// their outputs gathered into ChoiceStates as they arrive, the timings the metrics and the
// request log need, and the abort of whatever still runs when the client goes away.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/serving_loop.h"

namespace onnx_genai::server {

class JobRunner {
 public:
  JobRunner(ServingLoop& loop, GenerationJob job, std::string model_name);
  ~JobRunner();  // aborts the choices still running
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Submits every choice. A choice the engine refuses (bad parameters, a prompt it cannot fit)
  // aborts those already submitted and is a 400 with the engine's message.
  std::optional<ApiError> start();
  // The next output, applied to its choice's state; nullopt when none came within `timeout`.
  struct Update {
    size_t choice = 0;
    genai::RequestOutput output;
  };
  std::optional<Update> poll(std::chrono::milliseconds timeout);
  // Every choice finished, or the engine failed (error()).
  bool done() const;
  std::optional<std::string> error() const { return mailbox_->error(); }
  void abort();

  const GenerationJob& job() const { return job_; }
  const ResponseBuilder& builder() const { return builder_; }
  std::vector<ChoiceState>& choices() { return choices_; }
  // Records each choice in `metrics` and writes the request's log line (stderr).
  void finish(Metrics& metrics, int http_status, const std::string& route);

 private:
  struct Timing {
    Clock::time_point last;
    double ttft = -1, queue = -1;
    std::vector<double> gaps;
  };

  ServingLoop& loop_;
  GenerationJob job_;
  ResponseBuilder builder_;
  std::shared_ptr<Mailbox> mailbox_ = std::make_shared<Mailbox>();
  std::vector<uint64_t> ids_;  // engine request id of each choice
  std::vector<ChoiceState> choices_;
  std::vector<Timing> timing_;
  size_t finished_ = 0;
  bool finished_logged_ = false;
  const Clock::time_point start_ = Clock::now();
};

}  // namespace onnx_genai::server
