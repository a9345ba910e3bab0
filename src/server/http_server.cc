#include "server/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string_view>

#include <nlohmann/json.hpp>

#include "onnx_genai/tokenizer.h"
#include "server/chat_page.h"
#include "server/job_runner.h"
#include "server/openai_request.h"
#include "server/sockets.h"

namespace onnx_genai::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr size_t kMaxJsonDepth = 64;
constexpr auto kPollInterval = 100ms;       // how long a handler waits for output at a time
constexpr auto kDisconnectCheck = 250ms;    // how often it looks for a closed connection

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) { send_json(res, error.status, error_body(error)); }

// Nesting depth of a JSON text, strings skipped; bounds the parser's and dump()'s recursion.
size_t json_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool is_json_content_type(const std::string& value) {
  std::string lower;
  for (const char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.rfind("application/json", 0) == 0;
}

std::string sse(const json& event) { return "data: " + dump(event) + "\n\n"; }

}  // namespace

struct HttpServer::Impl {
  Impl(ServingLoop& l, ServerOptions o) : loop(l), options(std::move(o)) {}

  void add_routes();
  std::optional<json> read_json(const httplib::Request& req, httplib::Response& res) const;
  std::optional<ApiError> check_model(const json& body) const;
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void respond_whole(const httplib::Request& req, httplib::Response& res, JobRunner& runner, const std::string& route);
  void respond_stream(const httplib::Request& req, httplib::Response& res, std::shared_ptr<JobRunner> runner,
                      const std::string& route);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  json model_card() const;
  bool authorized(const httplib::Request& req) const;

  ServingLoop& loop;
  ServerOptions options;
  Metrics metrics;
  httplib::Server http;
  int listen_fd = -1;
  std::atomic<bool> draining{false};
  const std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
};

bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  const std::string expected = "Bearer " + options.api_key;
  const std::string given = req.get_header_value("Authorization");
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;  // compared in full whatever differs: the time says nothing of the key
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

std::optional<json> HttpServer::Impl::read_json(const httplib::Request& req, httplib::Response& res) const {
  const std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && !is_json_content_type(type)) {
    send_error(res, ApiError{415, "Content-Type must be application/json, got '" + type + "'"});
    return std::nullopt;
  }
  if (json_depth(req.body) > kMaxJsonDepth) {
    send_error(res, ApiError{400, "the JSON body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels"});
    return std::nullopt;
  }
  try {
    return json::parse(req.body);
  } catch (const json::parse_error& e) {
    send_error(res, ApiError{400, std::string("malformed JSON body: ") + e.what()});
    return std::nullopt;
  }
}

std::optional<ApiError> HttpServer::Impl::check_model(const json& body) const {
  const json* model = member(body, "model");
  if (!model) return std::nullopt;
  if (!model->is_string()) return ApiError{400, "model: expected a string", "model", ""};
  if (*model == options.served_model_name) return std::nullopt;
  return ApiError{404, "The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                           options.served_model_name + "'",
                  "model", "model_not_found"};
}

json HttpServer::Impl::model_card() const {
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(started.time_since_epoch()).count();
  return json{{"id", options.served_model_name},
              {"object", "model"},
              {"created", created},
              {"owned_by", "onnx-genai"},
              {"max_model_len", loop.model().info().context_length}};
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  std::optional<json> body = read_json(req, res);
  if (!body) return;
  if (auto error = check_model(*body)) return send_error(res, *error);
  if (draining) {
    res.set_header("Connection", "close");
    return send_error(res, ApiError{503, "the server is shutting down", "", "shutting_down"});
  }
  JobResult parsed = chat ? parse_chat_request(*body, loop.model()) : parse_completion_request(*body, loop.model());
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  GenerationJob& job = std::get<GenerationJob>(parsed);
  if (!loop.has_room(static_cast<int64_t>(job.choices()))) {
    metrics.count_rejected();
    res.set_header("Retry-After", "1");
    return send_error(res, ApiError{503, "the server is at its limit of queued requests; retry later", "", "queue_full"});
  }
  auto runner = std::make_shared<JobRunner>(loop, std::move(job), options.served_model_name);
  res.set_header("x-request-id", runner->builder().id());
  if (auto error = runner->start()) {
    runner->finish(metrics, error->status, req.path);
    return send_error(res, *error);
  }
  if (runner->job().stream) return respond_stream(req, res, std::move(runner), req.path);
  respond_whole(req, res, *runner, req.path);
}

void HttpServer::Impl::respond_whole(const httplib::Request& req, httplib::Response& res, JobRunner& runner,
                                     const std::string& route) {
  ConnectionWatch watch(req.remote_addr, req.remote_port, req.local_port);
  auto next_check = Clock::now() + kDisconnectCheck;
  while (!runner.done()) {
    runner.poll(kPollInterval);
    if (Clock::now() < next_check) continue;
    next_check = Clock::now() + kDisconnectCheck;
    if (watch.closed()) {
      runner.abort();
      runner.finish(metrics, 499, route);  // nginx's "client closed request": nobody reads it
      return;
    }
  }
  if (std::optional<std::string> error = runner.error()) {
    runner.finish(metrics, 500, route);
    return send_error(res, ApiError{500, "generation failed: " + *error});
  }
  runner.finish(metrics, 200, route);
  send_json(res, 200, runner.builder().response(runner.choices()));
}

// Server-sent events: chat opens each choice with a chunk carrying the role; each output then
// becomes a chunk; usage (stream_options.include_usage) and [DONE] close the stream.
void HttpServer::Impl::respond_stream(const httplib::Request& req, httplib::Response& res,
                                      std::shared_ptr<JobRunner> runner, const std::string& route) {
  struct StreamState {
    std::shared_ptr<JobRunner> runner;
    ConnectionWatch watch;
    bool opened = false;
    Clock::time_point next_check = Clock::now() + kDisconnectCheck;
  };
  auto state = std::make_shared<StreamState>(StreamState{std::move(runner), {req.remote_addr, req.remote_port, req.local_port}});
  res.set_header("Cache-Control", "no-cache");
  const auto provider = [this, state](size_t, httplib::DataSink& sink) -> bool {
    JobRunner& r = *state->runner;
    const GenerationJob& job = r.job();
    std::string out;
    if (!state->opened) {
      state->opened = true;
      for (size_t i = 0; (job.chat || job.echo) && i < job.choices(); ++i) {
        out += sse(r.builder().chunk(i, "", {}, genai::FinishReason::kNone, true, r.choices()[i]));
      }
    }
    if (std::optional<JobRunner::Update> u = r.poll(kPollInterval)) {
      const genai::RequestOutput& o = u->output;
      // A chunk per step that produced tokens, text or not (held back, or special tokens): clients
      // see the tokens' pace, and the finishing chunk always comes.
      if (!o.new_tokens.empty() || o.finished) {
        out += sse(r.builder().chunk(u->choice, o.new_text, o.logprobs, o.finished ? o.reason : genai::FinishReason::kNone,
                                     false, r.choices()[u->choice]));
      }
    } else if (Clock::now() >= state->next_check) {
      state->next_check = Clock::now() + kDisconnectCheck;
      if (state->watch.closed()) return false;
    }
    if (r.done()) {
      if (std::optional<std::string> error = r.error()) {
        out += sse(error_body(ApiError{500, "generation failed: " + *error}));
      } else if (job.include_usage) {
        out += sse(r.builder().usage_chunk(r.choices()));
      }
      out += "data: [DONE]\n\n";
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (r.done()) sink.done();
    return true;
  };
  const auto release = [this, state, route](bool success) {
    if (!success) state->runner->abort();
    state->runner->finish(metrics, success ? 200 : 499, route);
  };
  res.set_chunked_content_provider("text/event-stream", provider, release);
}

void HttpServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
  std::optional<json> body = read_json(req, res);
  if (!body) return;
  if (auto error = check_model(*body)) return send_error(res, *error);
  std::vector<int32_t> ids;
  const json* prompt = member(*body, "prompt");
  if (prompt && prompt->is_string()) {
    const Tokenizer* tokenizer = loop.model().tokenizer();
    if (!tokenizer) return send_error(res, ApiError{400, "the model has no tokenizer"});
    const json* special = member(*body, "add_special_tokens");
    EncodeOptions encode;
    encode.add_special_tokens = !special || !special->is_boolean() || special->get<bool>();
    Result<std::vector<int32_t>> encoded = tokenizer->encode(prompt->get<std::string>(), encode);
    if (!encoded) return send_error(res, ApiError{400, "prompt: " + encoded.status().message(), "prompt"});
    ids = std::move(*encoded);
  } else if (member(*body, "messages")) {
    JobResult parsed = parse_chat_request(*body, loop.model());
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    ids = std::move(std::get<GenerationJob>(parsed).prompts[0]);
  } else {
    return send_error(res, ApiError{400, "expected {\"prompt\": string} or {\"messages\": [...]}", "prompt"});
  }
  send_json(res, 200, json{{"count", ids.size()}, {"max_model_len", loop.model().info().context_length}, {"tokens", ids}});
}

void HttpServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
  std::optional<json> body = read_json(req, res);
  if (!body) return;
  if (auto error = check_model(*body)) return send_error(res, *error);
  const json* tokens = member(*body, "tokens");
  const int64_t vocab = loop.model().info().vocab_size;
  std::vector<int32_t> ids;
  if (!tokens || !tokens->is_array()) return send_error(res, ApiError{400, "tokens: expected a list of token ids", "tokens"});
  for (const json& id : *tokens) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      return send_error(res, ApiError{400, "tokens: ids must be integers in [0, " + std::to_string(vocab) + "), got " + dump(id), "tokens"});
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  const Tokenizer* tokenizer = loop.model().tokenizer();
  if (!tokenizer) return send_error(res, ApiError{400, "the model has no tokenizer"});
  Result<std::string> text = tokenizer->decode(ids);
  if (!text) return send_error(res, ApiError{400, "tokens: " + text.status().message(), "tokens"});
  send_json(res, 200, json{{"prompt", *text}});
}

void HttpServer::Impl::add_routes() {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kChatPage, "text/html; charset=utf-8"); });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, json{{"status", "ok"}}); });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(loop.stats(), loop.in_flight()), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, json{{"object", "list"}, {"data", json::array({model_card()})}});
  });
  http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != options.served_model_name) {
      return send_error(res, ApiError{404, "The model '" + req.matches[1].str() + "' does not exist", "model", "model_not_found"});
    }
    send_json(res, 200, model_card());
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
}

HttpServer::HttpServer(ServingLoop& loop, ServerOptions options) : impl_(std::make_unique<Impl>(loop, std::move(options))) {
  Impl& s = *impl_;
  const auto threads = static_cast<size_t>(s.options.http_threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_read_timeout(static_cast<time_t>(s.options.read_timeout_seconds));
  s.http.set_write_timeout(30);
  s.http.set_keep_alive_max_count(1000);
  // Streams are many small writes: with Nagle's algorithm each waits for the client's delayed
  // ACK (tens of ms). Accepted sockets inherit the option from the listening one.
  s.http.set_tcp_nodelay(true);
  s.http.set_payload_max_length(static_cast<size_t>(s.options.max_body_bytes));
  // Authentication before routing: the API's routes need the key; the page, /health and /metrics do not.
  s.http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    const bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (!guarded || s.authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError{401, "missing or wrong API key (Authorization: Bearer ...)", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404 no route, 413 body too large, 400 unreadable request) get
  // OpenAI's error body too.
  s.http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                                : res.status == 413 ? "the request body is larger than the server's limit"
                                                    : "the request could not be read";
    send_error(res, ApiError{res.status, message});
  });
  s.http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what += std::string(": ") + ex.what();
    } catch (...) {
    }
    send_error(res, ApiError{500, what});
  });
  // One line per request the generation handlers did not log themselves.
  s.http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (res.has_header("x-request-id")) return;
    std::fprintf(stderr, "onnx-genai serve: - %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
  s.add_routes();
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  Impl& s = *impl_;
  const int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                                       : (s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
  if (port < 0) return OG_ERROR("serve: cannot listen on ", s.options.host, ":", s.options.port, " (in use, or not an address of this machine)");
  s.listen_fd = find_listening_socket(port);
  if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
  return port;
}

Status HttpServer::listen() {
  // A drain ends the accept loop with an error (the socket was shut down under it).
  if (!impl_->http.listen_after_bind() && !impl_->draining) return OG_ERROR("serve: the server stopped with an error");
  return Status::ok();
}

void HttpServer::drain() {
  impl_->draining = true;
  // Shut down, not closed: httplib closes its own descriptor when accept() fails.
  if (impl_->listen_fd >= 0) ::shutdown(impl_->listen_fd, SHUT_RDWR);
}

const Metrics& HttpServer::metrics() const { return impl_->metrics; }

}  // namespace onnx_genai::server
