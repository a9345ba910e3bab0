// `onnx-genai serve`'s HTTP side: OpenAI's routes over the serving loop (cpp-httplib, Debian 12's
// libcpp-httplib-dev: a small, maintained server with a thread per connection, enough for the
// few hundred connections one model serves).
//
//   POST /v1/chat/completions, /v1/completions   (stream: Server-Sent Events ending data: [DONE])
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus), / (a chat page)
//   POST /tokenize, /detokenize
//
// Errors are OpenAI's error object: 400 bad JSON / fields / a prompt over the context, 401 a
// wrong or missing API key, 404 unknown routes and models, 413 bodies over the limit, 415 a body
// that is not JSON, 503 with Retry-After when the queue is full. A client that disconnects aborts
// its request. drain() stops accepting; requests in flight run to their end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "onnx_genai/status.h"
#include "server/metrics.h"
#include "server/serving_loop.h"

namespace onnx_genai::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port
  std::string api_key;                  // empty: no authentication
  std::string served_model_name;        // the "model" clients name
  int64_t max_body_bytes = 16 << 20;    // larger bodies get 413
  int64_t http_threads = 128;           // connections served at once
  int64_t read_timeout_seconds = 10;    // a client that sends nothing this long is dropped
};

class HttpServer {
 public:
  HttpServer(ServingLoop& loop, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address; returns the port (the chosen one for port 0).
  Result<int> bind();
  // Serves until drain(); returns once the connections in flight have ended.
  Status listen();
  // Stops accepting connections, and requests on open ones (503); requests in flight, streams
  // included, run to their end. Safe from any thread.
  void drain();
  const Metrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnx_genai::server
