#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace onnx_genai::server {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void write_metric(std::string& out, const char* type, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + number(value) + "\n";
}

// Bucket bounds in seconds, vLLM's for the same histograms.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                         1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kInterTokenBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                               0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBounds = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(kTtftBounds), inter_token_(kInterTokenBounds), e2e_(kRequestBounds), queue_(kRequestBounds) {}

void Metrics::record(const RequestRecord& r) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += r.prompt_tokens;
  generation_tokens_ += r.generation_tokens;
  ++finished_[r.finish_reason];
  if (r.ttft_seconds >= 0) ttft_.observe(r.ttft_seconds);
  if (r.queue_seconds >= 0) queue_.observe(r.queue_seconds);
  for (const double gap : r.inter_token) inter_token_.observe(gap);
  e2e_.observe(r.e2e_seconds);
}

std::string Metrics::render(const genai::EngineStats& stats, int64_t in_flight) const {
  std::string out;
  const auto used = static_cast<double>(stats.kv_blocks_used);
  write_metric(out, "gauge", "onnx_genai:num_requests_running", "Requests in the engine's running batch.",
               static_cast<double>(stats.running));
  // Submitted requests the scheduler has not admitted yet (its own waiting queue and the inbox).
  const int64_t waiting = std::max<int64_t>(stats.waiting, in_flight - stats.running);
  write_metric(out, "gauge", "onnx_genai:num_requests_waiting", "Requests waiting to be scheduled.",
               static_cast<double>(waiting));
  write_metric(out, "gauge", "onnx_genai:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = all).",
               stats.kv_blocks > 0 ? used / static_cast<double>(stats.kv_blocks) : 0.0);
  write_metric(out, "counter", "onnx_genai:prefix_cache_queries_total", "Prefix cache queries, in blocks.",
               static_cast<double>(stats.prefix_queries));
  write_metric(out, "counter", "onnx_genai:prefix_cache_hits_total", "Prefix cache hits, in blocks.",
               static_cast<double>(stats.prefix_hits));
  write_metric(out, "counter", "onnx_genai:num_preemptions_total", "Requests preempted for want of KV blocks.",
               static_cast<double>(stats.preemptions));
  write_metric(out, "counter", "onnx_genai:spec_decode_num_draft_tokens_total", "Speculative draft tokens verified.",
               static_cast<double>(stats.drafted_tokens));
  write_metric(out, "counter", "onnx_genai:spec_decode_num_accepted_tokens_total",
               "Speculative draft tokens accepted.", static_cast<double>(stats.accepted_tokens));
  std::lock_guard lock(mutex_);
  write_metric(out, "counter", "onnx_genai:prompt_tokens_total", "Prompt tokens of finished requests.",
               static_cast<double>(prompt_tokens_));
  write_metric(out, "counter", "onnx_genai:generation_tokens_total", "Generated tokens of finished requests.",
               static_cast<double>(generation_tokens_));
  write_metric(out, "counter", "onnx_genai:request_rejected_total", "Requests refused because the queue was full.",
               static_cast<double>(rejected_));
  out += "# HELP onnx_genai:request_success_total Finished requests by finish reason.\n"
         "# TYPE onnx_genai:request_success_total counter\n";
  for (const auto& [reason, count] : finished_) {
    out += "onnx_genai:request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(count) + "\n";
  }
  ttft_.write(out, "onnx_genai:time_to_first_token_seconds", "Time to the first generated token.");
  inter_token_.write(out, "onnx_genai:inter_token_latency_seconds", "Time between consecutive generated tokens.");
  e2e_.write(out, "onnx_genai:e2e_request_latency_seconds", "Time from arrival to the last token.");
  queue_.write(out, "onnx_genai:request_queue_time_seconds", "Time from arrival until first scheduled.");
  return out;
}

}  // namespace onnx_genai::server
