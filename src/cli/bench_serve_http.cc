#include "cli/bench_serve_http.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace onnx_genai::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Outcome {
  Timeline timeline;
  int64_t prompt_tokens = 0, output_tokens = 0;
  std::string error;  // empty when the request succeeded
};

// One streamed completion; times each token as its chunk arrives.
Outcome run_request(httplib::Client& client, const std::string& api_key, const std::vector<int32_t>& prompt,
                    int64_t max_tokens, Clock::time_point start) {
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Outcome out;
  out.timeline.arrival = now();
  const nlohmann::json body{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
                            {"stream", true},   {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.headers = {{"Content-Type", "application/json"}};
  if (!api_key.empty()) req.headers.emplace("Authorization", "Bearer " + api_key);
  std::string buffered;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    buffered.append(data, size);
    for (size_t end; (end = buffered.find("\n\n")) != std::string::npos; buffered.erase(0, end + 2)) {
      const std::string event = buffered.substr(0, end);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const nlohmann::json chunk = nlohmann::json::parse(event.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        out.prompt_tokens = chunk["usage"].value("prompt_tokens", int64_t{0});
        out.output_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
      }
      // Each chunk with a choice is a step's tokens (onnx-genai sends one per step, llama-server
      // one per token); the first is the first token.
      if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) continue;
      const double t = now();
      out.timeline.token_times.push_back(t);
      if (out.timeline.first < 0) out.timeline.first = t;
    }
    return true;
  };
  httplib::Result result = client.send(req);
  if (!result && out.timeline.token_times.empty()) result = client.send(req);  // a keep-alive connection the server closed
  out.timeline.last = now();
  if (out.output_tokens == 0) out.output_tokens = static_cast<int64_t>(out.timeline.token_times.size());  // no usage chunk
  out.timeline.tokens = out.output_tokens;
  if (out.prompt_tokens == 0) out.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (!result) {
    out.error = "request failed: " + httplib::to_string(result.error());
  } else if (result->status != 200) {
    out.error = "HTTP " + std::to_string(result->status) + ": " + result->body.substr(0, 200);
  }
  return out;
}

}  // namespace

Result<ServeResult> serve_over_http(const std::string& url, const std::string& api_key, int64_t concurrency,
                                    const Workload& w) {
  ServeResult r;
  r.requests.resize(w.prompts.size());
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::string first_error;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int64_t c = 0; c < concurrency; ++c) {
    workers.emplace_back([&] {
      httplib::Client client(url);  // one keep-alive connection per worker
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(600);
      for (size_t i; (i = next.fetch_add(1)) < w.prompts.size();) {
        Outcome o = run_request(client, api_key, w.prompts[i], w.gen_lens[i], start);
        std::lock_guard lock(mutex);
        if (!o.error.empty() && first_error.empty()) first_error = o.error;
        r.requests[i] = std::move(o.timeline);
        r.output_tokens += o.output_tokens;
        r.prompt_tokens += o.prompt_tokens;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!first_error.empty()) return OG_ERROR("bench-serve --url ", url, ": ", first_error);
  return r;
}

}  // namespace onnx_genai::cli
