// The server's Prometheus metrics (GET /metrics, text format 0.0.4), named like vLLM's with an
// onnx_genai: prefix: gauges of requests running / waiting and KV cache use, counters of prefix
// cache queries / hits, tokens and finished requests, and latency histograms.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "onnx_genai/engine.h"

namespace onnx_genai::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // `name`_bucket{le=...}, _sum and _count lines.
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One finished request, as the server saw it.
struct RequestRecord {
  int64_t prompt_tokens = 0, generation_tokens = 0;
  double queue_seconds = -1;        // < 0: not known (never scheduled)
  double ttft_seconds = -1;         // < 0: no token came
  std::vector<double> inter_token;  // seconds between consecutive tokens
  double e2e_seconds = 0;
  std::string finish_reason;        // "stop", "length", "abort", "error"
};

class Metrics {
 public:
  Metrics();
  void record(const RequestRecord& r);
  void count_rejected() { std::lock_guard lock(mutex_); ++rejected_; }
  // The exposition text, with the engine's gauges and counters of `stats`.
  std::string render(const genai::EngineStats& stats, int64_t in_flight) const;

 private:
  mutable std::mutex mutex_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, rejected_ = 0;
  std::map<std::string, int64_t> finished_;  // by finish reason
  Histogram ttft_, inter_token_, e2e_, queue_;
};

}  // namespace onnx_genai::server
