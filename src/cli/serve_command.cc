#include "cli/serve_command.h"

#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli/run_support.h"
#include "cli/speculative_options.h"
#include "onnx_genai/engine.h"
#include "server/http_server.h"
#include "server/serving_loop.h"

namespace onnx_genai::cli {

namespace {

struct ServeOptions {
  std::string model_path;
  server::ServerOptions http;
  genai::EngineOptions engine;
  int64_t max_queued_requests = 1024;
  int64_t drain_seconds = 30;
  bool no_prefix_caching = false;
  bool fast_forward = false;
  SpeculativeOptions speculative;
};

Result<ServeOptions> parse_serve_options(std::span<const std::string> args) {
  ServeOptions o;
  OptionTable table;
  const auto text = [](std::string& field) {
    return [&field](const std::string&, const std::string& value) -> Status {
      field = value;
      return Status::ok();
    };
  };
  int64_t port = o.http.port;
  table.valued["--host"] = text(o.http.host);
  table.valued["--port"] = integer_option(port, 0, 65535);
  table.valued["--api-key"] = text(o.http.api_key);
  table.valued["--served-model-name"] = text(o.http.served_model_name);
  table.valued["--max-body-bytes"] = integer_option(o.http.max_body_bytes, 1024, 1LL << 34);
  table.valued["--http-threads"] = integer_option(o.http.http_threads, 2, 4096);
  table.valued["--read-timeout"] = integer_option(o.http.read_timeout_seconds, 1, 3600);
  table.valued["--max-queued-requests"] = integer_option(o.max_queued_requests, 1, 1 << 20);
  table.valued["--drain-timeout"] = integer_option(o.drain_seconds, 0, 86400);
  add_engine_options(table, o.engine);
  add_speculative_options(table, o.speculative);
  table.flags = {{"--no-prefix-caching", &o.no_prefix_caching}, {"--fast-forward", &o.fast_forward}};
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  o.http.port = static_cast<int>(port);
  o.engine.prefix_caching = !o.no_prefix_caching;
  if (o.http.host.empty()) return OG_ERROR("--host wants an address, got ''");
  return o;
}

// Every connection holds a descriptor: let the server use as many as the hard limit allows.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int run_serve(std::span<const std::string> args) {
  Result<ServeOptions> parsed = parse_serve_options(args);
  if (!parsed) return report(kExitBadInput, parsed.status().message());
  ServeOptions& o = *parsed;
  Result<std::string> dir = resolve_model_dir(o.model_path, "serve");
  if (!dir) return report(kExitBadInput, dir.status().message());
  if (o.http.served_model_name.empty()) o.http.served_model_name = std::filesystem::path(*dir).filename().string();

  // Signals go to one thread that waits for them: blocked here, before any thread starts, so
  // every thread inherits the mask. A client that vanishes mid-write must not kill the server.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  raise_descriptor_limit();

  Result<std::unique_ptr<genai::Engine>> engine = genai::Engine::load(*dir, o.engine);
  if (!engine) return report(kExitBadInput, engine.status().message());
  Result<SpeculativeSetup> speculative = load_speculative(o.speculative, o.engine.model);
  if (!speculative) return report(kExitBadInput, speculative.status().message());
  // Every step shape compiles before the port opens, not while the first users wait.
  const auto warm_start = std::chrono::steady_clock::now();
  Result<int64_t> warmed = (*engine)->warm_up();
  if (!warmed) return report(kExitFailed, warmed.status().message());
  const double warm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count();
  // Constrained requests draft the text their grammar forces: the same tokens (greedy: the
  // engine's rows do not depend on the step's width; sampling: the same distribution), fewer
  // steps. Opt-in: where a verify step costs several one-token steps (the CPU) it was slower.
  speculative->params.fast_forward = o.fast_forward;
  server::ServingLoop loop(std::move(*engine), o.max_queued_requests, speculative->params);
  server::HttpServer http(loop, o.http);
  Result<int> port = http.bind();
  if (!port) return report(kExitBadInput, port.status().message());
  const genai::EngineStats stats = loop.stats();
  std::fprintf(stderr,
               "onnx-genai serve: model %s on %s, %s KV cache of %lld blocks of %lld, %lld step shapes ready in %.1f s; "
               "listening on http://%s:%d\n",
               o.http.served_model_name.c_str(), loop.model().device().to_string().c_str(), stats.paged ? "paged" : "per-request",
               static_cast<long long>(stats.kv_blocks), static_cast<long long>(stats.block_size),
               static_cast<long long>(*warmed), warm_seconds, o.http.host.c_str(), *port);

  std::atomic<bool> listen_ended{false};
  std::thread watcher([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (listen_ended) return;
    std::fprintf(stderr, "onnx-genai serve: %s: no new connections; draining %lld requests (at most %llds)\n",
                 strsignal(signal), static_cast<long long>(loop.in_flight()), static_cast<long long>(o.drain_seconds));
    http.drain();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.drain_seconds);
    while (loop.in_flight() > 0 && std::chrono::steady_clock::now() < deadline && !listen_ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (loop.in_flight() > 0) {
      std::fprintf(stderr, "onnx-genai serve: aborting %lld requests at the drain deadline\n",
                   static_cast<long long>(loop.in_flight()));
      loop.abort_all();
    }
  });
  const Status served = http.listen();
  listen_ended = true;
  pthread_kill(watcher.native_handle(), SIGTERM);  // wakes its sigwait if no signal came
  watcher.join();
  if (!served.is_ok()) return report(kExitFailed, served.message());
  std::fprintf(stderr, "onnx-genai serve: stopped\n");
  return 0;
}

}  // namespace onnx_genai::cli
