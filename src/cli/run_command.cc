#include "cli/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/line_editor.h"
#include "cli/run_support.h"
#include "cli/terminal_feedback.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

namespace {

constexpr const char* kHelp =
    "/system TEXT  system message for the following turns\n"
    "/reset        forget the conversation\n"
    "/stats        numbers of the last reply\n"
    "/help         this text\n"
    "/exit         leave (also end of input; Ctrl-C twice at the prompt)\n";

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

// Without SA_RESTART, so Ctrl-C at the prompt also ends the blocked read.
void install_sigint_handler() {
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

struct ChatOptions {
  std::string model_path;
  std::optional<std::string> system;
  std::optional<int64_t> max_new_tokens;
  genai::ModelOptions model;  // --threads, --device
  bool greedy = false;
  int64_t max_input_bytes = kDefaultMaxInputBytes;  // of one input line
};

Result<ChatOptions> parse_chat_options(std::span<const std::string> args) {
  ChatOptions o;
  OptionTable table;
  table.valued["--system"] = [&](const std::string& option, const std::string& value) -> Status {
    OG_RETURN_IF_ERROR(check_utf8(value, option));
    o.system = value;
    return Status::ok();
  };
  table.valued["--max-new-tokens"] = [&](const std::string& option, const std::string& value) -> Status {
    OG_ASSIGN_OR_RETURN(o.max_new_tokens, parse_integer(value, option, 0, INT32_MAX));
    return Status::ok();
  };
  add_model_options(table, o.model);
  add_tensor_parallel_option(table, o.model);
  add_input_limit_option(table, o.max_input_bytes);
  table.flags = {{"--greedy", &o.greedy}};
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  return o;
}

// What one turn cost: `now` minus `before` of the same generator.
genai::GenerationStats stats_since(const genai::GenerationStats& now, const genai::GenerationStats& before) {
  genai::GenerationStats turn;
  turn.prefill_tokens = now.prefill_tokens - before.prefill_tokens;
  turn.prefill_seconds = now.prefill_seconds - before.prefill_seconds;
  turn.decode_steps = now.decode_steps - before.decode_steps;
  turn.decode_tokens = now.decode_tokens - before.decode_tokens;
  turn.decode_seconds = now.decode_seconds - before.decode_seconds;
  turn.sampling_seconds = now.sampling_seconds - before.sampling_seconds;
  return turn;
}

class ChatSession {
 public:
  ChatSession(const genai::Model& model, const ChatOptions& options) : model_(model), system_(options.system) {
    params_ = model.default_params();
    // Replies stream as they are generated and later turns append to the cache: no beam search,
    // whatever the package's num_beams.
    params_.beam = {};
    if (options.greedy) params_.sampling.greedy = true;
    if (options.max_new_tokens) params_.max_new_tokens = *options.max_new_tokens;
  }

  // Handles one input line; false when the session should end.
  bool handle(const std::string& line) {
    ++line_number_;
    if (line == "/exit" || line == "/quit") return false;
    if (const Status valid = check_utf8(line, "input line " + std::to_string(line_number_)); !valid.is_ok()) {
      fail(valid);
    } else if (line == "/reset") {
      history_ = nlohmann::json::array();
      generator_.reset();
    } else if (line == "/help") {
      std::fputs(kHelp, stdout);
    } else if (line == "/stats") {
      print_stats();
    } else if (line.starts_with("/system ") || line == "/system") {
      system_ = line.size() > 8 ? std::optional(line.substr(8)) : std::nullopt;
      generator_.reset();
    } else if (line.starts_with("/")) {
      std::fprintf(stderr, "unknown command '%s' (try /help)\n", line.c_str());
    } else if (!line.empty()) {
      const Status status = reply(line);
      if (!status.is_ok()) {
        generator_.reset();  // its state is unknown after a failed step
        fail(status);
      }
    }
    std::fflush(stdout);
    return true;
  }

  // Whether a line failed (the session goes on; the exit status says so at the end).
  bool any_failed() const { return any_failed_; }
  size_t next_line_number() const { return line_number_ + 1; }

 private:
  Status reply(const std::string& user_text) {
    nlohmann::json messages = nlohmann::json::array();
    if (system_) messages.push_back({{"role", "system"}, {"content", *system_}});
    for (const auto& message : history_) messages.push_back(message);
    messages.push_back({{"role", "user"}, {"content", user_text}});
    ChatRequest request;
    request.messages_json = messages.dump();
    request.add_generation_prompt = true;
    OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model_.encode_chat(request));
    OG_RETURN_IF_ERROR(start_turn(ids));
    genai::Generator& generator = *generator_;
    const genai::GenerationStats before = generator.stats();
    last_prompt_ = ids.size();
    last_reused_ = generator.cached_length(0);
    std::string text;
    while (!generator.is_done() && !g_interrupted) {
      OG_RETURN_IF_ERROR(generator.generate_next());
      const std::string& piece = generator.new_text(0);
      text += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    std::fputc('\n', stdout);
    g_interrupted = 0;  // a Ctrl-C that stopped this reply is spent
    last_stats_ = stats_since(generator.stats(), before);
    last_generated_ = generator.tokens(0).size() - generator.prompt_length(0);
    const PromptReuse reuse{last_reused_, last_prompt_ - last_reused_};
    print_reply_stats_line(last_stats_, last_generated_, &reuse);
    history_.push_back({{"role", "user"}, {"content", user_text}});
    history_.push_back({{"role", "assistant"}, {"content", text}});
    return Status::ok();
  }

  // Continues the kept generator from the longest prefix its tokens share with `ids` (their keys
  // and values stay in the cache; only the rest is prefilled), else starts a fresh one: on the
  // first turn, after /reset or /system, or when the kept one cannot take the new tokens.
  Status start_turn(const std::vector<int32_t>& ids) {
    if (generator_ && !ids.empty()) {
      const std::span<const int32_t> cached = generator_->tokens(0);
      const auto shared = static_cast<size_t>(
          std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
      const size_t keep = std::min(shared, ids.size() - 1);  // at least one token to append
      if (keep > 0 && generator_->rewind(keep).is_ok() &&
          generator_->append_tokens(std::span(ids).subspan(keep)).is_ok()) {
        return Status::ok();
      }
    }
    genai::GeneratorParams params = params_;
    params.prompts = {ids};
    OG_ASSIGN_OR_RETURN(generator_, genai::Generator::create(model_, params));
    return Status::ok();
  }

  void fail(const Status& status) {
    any_failed_ = true;
    report(kExitFailed, status.message());
  }

  void print_stats() const {
    const auto rate = [](double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; };
    std::printf("prompt %zu tokens: %zu reused from the cache, %zu prefilled in %.1f ms (%.1f tok/s); "
                "%zu tokens generated, decode %.1f tok/s; %zu messages\n",
                last_prompt_, last_reused_, last_prompt_ - last_reused_, last_stats_.prefill_seconds * 1e3,
                rate(static_cast<double>(last_stats_.prefill_tokens), last_stats_.prefill_seconds), last_generated_,
                rate(static_cast<double>(last_stats_.decode_tokens), last_stats_.decode_seconds), history_.size());
  }

  const genai::Model& model_;
  genai::GeneratorParams params_;
  std::optional<std::string> system_;
  nlohmann::json history_ = nlohmann::json::array();
  std::unique_ptr<genai::Generator> generator_;  // kept across turns for its KV cache
  genai::GenerationStats last_stats_;            // of the last turn
  size_t last_prompt_ = 0, last_reused_ = 0, last_generated_ = 0;
  size_t line_number_ = 0;  // of the input, for errors
  bool any_failed_ = false;
};

// Lines through the line editor until /exit, end of input (Ctrl-D) or two Ctrl-C in a row at an
// empty prompt; Ctrl-C on a line with text cancels that line.
void edited_chat_loop(ChatSession& session) {
  LineEditor editor(STDIN_FILENO, STDOUT_FILENO, default_history_path());
  int cancels_at_empty_prompt = 0;
  while (true) {
    std::fflush(stdout);
    // Raw mode keeps Ctrl-C a byte while editing; from the line's end it is SIGINT and stops the
    // reply, including during its prompt's encoding and prefill.
    g_interrupted = 0;
    const LineEditor::ReadResult read = editor.read_line("> ");
    if (read.status == LineEditor::Status::kEndOfInput) return;
    if (read.status == LineEditor::Status::kCancelled) {
      if (!read.line.empty()) {
        cancels_at_empty_prompt = 0;
        continue;
      }
      if (++cancels_at_empty_prompt >= 2) return;
      std::fputs("(Ctrl-C again or /exit to leave)\n", stdout);
      continue;
    }
    cancels_at_empty_prompt = 0;
    if (!session.handle(read.line)) return;
  }
}

// std::getline up to `max_bytes`: false at the end of input (or an interrupted read), an error for
// a longer line (`run < /dev/zero` would otherwise grow one line until memory runs out).
Result<bool> read_line(std::string& line, int64_t max_bytes, size_t line_number) {
  line.clear();
  for (int c = std::cin.get(); c != std::char_traits<char>::eof(); c = std::cin.get()) {
    if (c == '\n') return true;
    if (static_cast<int64_t>(line.size()) == max_bytes) {
      return OG_ERROR("input line ", line_number, " is longer than the limit of ", max_bytes,
                      " bytes (--max-input-bytes raises it)");
    }
    line += static_cast<char>(c);
  }
  return !line.empty();  // a last line without a newline still counts
}

// Plain lines until /exit or end of input; on a terminal (stdin only), two Ctrl-C in a row at the
// prompt exit. A failed read (stdin a directory) is an error, not an end of input.
Status plain_chat_loop(ChatSession& session, int64_t max_line_bytes) {
  const bool terminal = isatty(STDIN_FILENO);
  int interrupts_at_prompt = 0;
  std::string line;
  while (true) {
    if (terminal) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    g_interrupted = 0;  // from here a Ctrl-C ends the read or stops the reply to this line
    OG_ASSIGN_OR_RETURN(const bool read, read_line(line, max_line_bytes, session.next_line_number()));
    if (!read) {
      if (!g_interrupted && std::ferror(stdin)) return OG_ERROR("cannot read stdin: ", std::strerror(errno));
      if (!g_interrupted || ++interrupts_at_prompt >= 2) return Status::ok();
      g_interrupted = 0;
      std::cin.clear();
      clearerr(stdin);  // std::cin reads through stdio, which remembers the interrupted read
      std::fputs("\n(Ctrl-C again or /exit to leave)\n", stdout);
      continue;
    }
    interrupts_at_prompt = 0;
    if (!session.handle(line)) return Status::ok();
  }
}

}  // namespace

int run_chat(std::span<const std::string> args) {
  auto options = parse_chat_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto dir = resolve_model_dir(options->model_path, "run");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  auto model = load_model_with_progress(*dir, options->model);
  if (!model.is_ok()) return report(kExitBadInput, model.status().message());
  if (!(*model)->tokenizer()) return report(kExitBadInput, "the model folder " + *dir + " has no tokenizer.json");
  install_sigint_handler();
  ChatSession session(**model, *options);
  if (isatty(STDIN_FILENO)) std::fputs("onnx-genai chat; /help for commands\n", stdout);
  if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
    edited_chat_loop(session);
  } else if (const Status read = plain_chat_loop(session, options->max_input_bytes); !read.is_ok()) {
    return report(kExitFailed, read.message());
  }
  return session.any_failed() ? kExitFailed : 0;
}

}  // namespace onnx_genai::cli
