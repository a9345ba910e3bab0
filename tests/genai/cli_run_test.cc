// `onnx-genai run` as a user runs it, on a greedy model built by tools/build_model.py with the
// byte-level tokenizer of genai_test_util.h. Over a pipe, a three-turn conversation (which keeps
// one generator and reuses its KV cache) answers exactly as fresh API generations of each whole
// conversation, and /stats counts the reused prefix: the longest common prefix of the previous
// turn's tokens and the new conversation's, less the last shared token, which is fed again. On a
// pseudo-terminal, typed keys edit the line (Left + insert, Up recalls), Ctrl-C stops a reply, the
// history file gets the lines, and the terminal's attributes after exit equal those before.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::shell_quote;

constexpr int kVocab = 300;
constexpr int kNewTokens = 16;

struct Turn {
  std::string text;             // the reply as streamed
  std::vector<int32_t> prompt;  // the conversation's chat encoding
  std::vector<int32_t> tokens;  // prompt and reply tokens (eos included)
};

std::string without_carriage_returns(std::string text) {
  std::erase(text, '\r');
  return text;
}

// A child process on a new pseudo-terminal; the test holds both sides.
class PtyProcess {
 public:
  PtyProcess(const std::vector<std::string>& argv, const fs::path& state_home) {
    winsize size{};
    size.ws_row = 40;
    size.ws_col = 200;
    if (openpty(&master_, &slave_, nullptr, nullptr, &size) != 0) return;
    if (tcgetattr(slave_, &initial_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(master_);
      login_tty(slave_);  // new session, the pty as controlling terminal and stdin/out/err
      setenv("XDG_STATE_HOME", state_home.c_str(), 1);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
    if (slave_ >= 0) close(slave_);
  }
  PtyProcess(const PtyProcess&) = delete;
  PtyProcess& operator=(const PtyProcess&) = delete;

  bool started() const { return pid_ > 0; }
  const termios& initial_attributes() const { return initial_; }
  termios attributes() const {
    termios now{};
    tcgetattr(slave_, &now);
    return now;
  }
  const std::string& output() const { return output_; }
  void signal(int number) const { kill(pid_, number); }
  int terminating_signal() const { return terminating_signal_; }

  // Waits until the terminal is (`canonical`) or is not in canonical mode: keys sent at a prompt
  // must reach the line editor in raw mode, not the line discipline's line editing.
  bool wait_for_mode(bool canonical) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (static_cast<bool>(attributes().c_lflag & ICANON) != canonical) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      usleep(500);
    }
    return true;
  }

  void send(const std::string& bytes) {
    ASSERT_EQ(write(master_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  // Reads until `needle` appears at or after output offset `from`; false after 30 s.
  bool wait_for(const std::string& needle, size_t from) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (output_.find(needle, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(100)) return false;
    }
    return true;
  }

  // Reads until the output is longer than `size`; false after 30 s.
  bool wait_for_output_beyond(size_t size) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (output_.size() <= size) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(100)) return false;
    }
    return true;
  }

  // The exit status, after draining output; -1 when it did not exit normally within 30 s.
  // A signal that ended it is then terminating_signal().
  int wait_exit() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      read_some(50);
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        while (read_some(0)) {
        }
        if (WIFSIGNALED(status)) terminating_signal_ = WTERMSIG(status);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -1;
  }

 private:
  // Appends what the child wrote within `timeout_ms`; false on nothing or an error.
  bool read_some(int timeout_ms) {
    pollfd fd{master_, POLLIN, 0};
    if (poll(&fd, 1, timeout_ms) <= 0) return timeout_ms > 0;  // a quiet wait is not an error
    char buffer[4096];
    const ssize_t n = read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  int master_ = -1, slave_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  int terminating_signal_ = 0;
  termios initial_{};
  std::string output_;
};

// The reply's stats line (stderr) ends, and the next prompt is drawn (output newlines become
// "\r\n" on a terminal; the prompt starts with a carriage return).
constexpr const char* kStatsThenPrompt = "]\r\n\r> ";

bool same_attributes(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag && a.c_lflag == b.c_lflag &&
         std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0;
}

class CliRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    dir_ = testing::build_model_with_test_tokenizer(
        {"run_qwen2", {"--preset", "qwen2", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""}, scratch_->path(), kVocab);
    // Wider and with a long context, so that a reply lasts long enough to be interrupted.
    slow_dir_ = testing::build_model_with_test_tokenizer(
        {"run_qwen2_slow",
         {"--preset", "qwen2", "--style", "genai", "--set", "vocab_size=300", "--set", "hidden_size=512", "--set",
          "intermediate_size=1536", "--set", "num_hidden_layers=4", "--set", "num_attention_heads=8", "--set",
          "max_position_embeddings=4096"},
         {}, 0, ""}, scratch_->path(), kVocab);
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    ASSERT_FALSE(slow_dir_.empty());
    ASSERT_TRUE(local_.valid());
    auto model = genai::Model::load(dir_.string());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(*model);
  }

  // A fresh greedy generation (`max_new_tokens` at most, eos ends it) of the whole conversation.
  static Turn fresh_reply(const genai::Model& model, const nlohmann::json& messages, int max_new_tokens) {
    Turn turn;
    ChatRequest request;
    request.messages_json = messages.dump();
    request.add_generation_prompt = true;
    auto ids = model.encode_chat(request);
    EXPECT_TRUE(ids.is_ok()) << ids.status().message();
    if (!ids.is_ok()) return turn;
    turn.prompt = *ids;
    genai::GeneratorParams params = model.default_params();
    params.sampling.greedy = true;
    params.max_new_tokens = max_new_tokens;
    params.prompts = {*ids};
    auto generator = genai::Generator::create(model, params);
    EXPECT_TRUE(generator.is_ok()) << generator.status().message();
    if (!generator.is_ok()) return turn;
    EXPECT_TRUE((*generator)->generate([&](size_t, std::string_view piece) { turn.text += piece; }).is_ok());
    const auto tokens = (*generator)->tokens(0);
    turn.tokens.assign(tokens.begin(), tokens.end());
    return turn;
  }

  // The conversation after `users` turns, each answered by a fresh generation.
  std::vector<Turn> fresh_conversation(const std::vector<std::string>& users) {
    std::vector<Turn> turns;
    nlohmann::json messages = nlohmann::json::array();
    for (const std::string& user : users) {
      messages.push_back({{"role", "user"}, {"content", user}});
      turns.push_back(fresh_reply(*model_, messages, kNewTokens));
      messages.push_back({{"role", "assistant"}, {"content", turns.back().text}});
    }
    return turns;
  }

  std::string run_args(int new_tokens) const {
    return "run " + shell_quote(dir_.string()) + " --greedy --max-new-tokens " + std::to_string(new_tokens);
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path dir_, slow_dir_;
  std::unique_ptr<genai::Model> model_;
  testing::ScopedTempDir local_;
};

testing::ScopedTempDir* CliRun::scratch_ = nullptr;
fs::path CliRun::dir_;
fs::path CliRun::slow_dir_;

// /stats' "prompt N tokens: R reused from the cache, N-R prefilled".
std::string stats_prefix(size_t prompt, size_t reused) {
  return "prompt " + std::to_string(prompt) + " tokens: " + std::to_string(reused) + " reused from the cache, " +
         std::to_string(prompt - reused) + " prefilled in ";
}

TEST_F(CliRun, ReusedCacheGivesTheFreshReplies) {
  const std::vector<std::string> users = {"hi there", "and then", "tell me more"};
  const std::vector<Turn> fresh = fresh_conversation(users);
  std::vector<std::string> expected_stats = {stats_prefix(fresh[0].prompt.size(), 0)};
  for (size_t k = 1; k < fresh.size(); ++k) {
    const std::vector<int32_t>& before = fresh[k - 1].tokens;
    const std::vector<int32_t>& now = fresh[k].prompt;
    const auto shared = static_cast<size_t>(std::mismatch(before.begin(), before.end(), now.begin(), now.end()).first -
                                            before.begin());
    ASSERT_GT(shared, fresh[k - 1].prompt.size() / 2) << "turn " << k << " shares too little to test reuse";
    expected_stats.push_back(stats_prefix(now.size(), shared - 1));
  }

  const CommandResult r = testing::run_cli(
      run_args(kNewTokens), users[0] + "\n/stats\n" + users[1] + "\n/stats\n" + users[2] + "\n/stats\n", local_.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  size_t at = 0;
  for (size_t k = 0; k < fresh.size(); ++k) {
    const std::string reply = fresh[k].text + "\n" + expected_stats[k];
    ASSERT_EQ(r.out.compare(at, reply.size(), reply), 0) << "turn " << k << ": wanted '" << reply << "' at " << at
                                                         << " of\n" << r.out;
    at = r.out.find('\n', at + reply.size()) + 1;
  }
  EXPECT_EQ(at, r.out.size()) << r.out;

  // /reset and /system drop the reuse: the next turn prefills everything again.
  const std::string second_prompt = std::to_string(fresh[1].prompt.size());
  CommandResult reset = testing::run_cli(run_args(kNewTokens), "hi there\n/reset\nhi there\n/stats\n", local_.path());
  EXPECT_NE(reset.out.find(stats_prefix(fresh[0].prompt.size(), 0)), std::string::npos) << reset.out;
  CommandResult system = testing::run_cli(run_args(kNewTokens), "hi there\n/system be brief\nand then\n/stats\n",
                                          local_.path());
  EXPECT_NE(system.out.find(" tokens: 0 reused from the cache"), std::string::npos) << system.out;
}

// Keys as a terminal sends them: "hi thee", Left, "r", Enter types "hi there"; Up, End, "!" and
// Enter send "hi there!"; Ctrl-C during a long reply stops it; Ctrl-D at the empty prompt leaves.
TEST_F(CliRun, TerminalEditsRecallsAndRestoresTheTerminal) {
  const std::vector<Turn> fresh = fresh_conversation({"hi there", "hi there!"});
  const fs::path state = local_.path() / "state";
  PtyProcess child({OG_CLI_PATH, "run", dir_.string(), "--greedy", "--max-new-tokens", std::to_string(kNewTokens)},
                   state);
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.wait_for("> ", 0)) << child.output();
  EXPECT_FALSE(same_attributes(child.attributes(), child.initial_attributes())) << "no raw mode while reading";

  size_t from = child.output().size();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("hi thee\x1b[Dr\r");
  ASSERT_TRUE(child.wait_for(kStatsThenPrompt, from)) << child.output();
  // The last redraw: the line, erase to the end of the row, the cursor one column left.
  std::string shown = without_carriage_returns(child.output().substr(from));
  EXPECT_NE(shown.find("> hi there\x1b[K\x1b[1D\n" + without_carriage_returns(fresh[0].text) + "\n["),
            std::string::npos)
      << shown;

  from = child.output().size();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("\x1b[A\x1b[F!\r");
  ASSERT_TRUE(child.wait_for(kStatsThenPrompt, from)) << child.output();
  shown = without_carriage_returns(child.output().substr(from));
  EXPECT_NE(shown.find("> hi there!\x1b[K\n" + without_carriage_returns(fresh[1].text) + "\n["), std::string::npos)
      << shown;

  from = child.output().size();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("\x03");  // at an empty prompt: a hint, not the end
  ASSERT_TRUE(child.wait_for("Ctrl-C again", from)) << child.output();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("\x04");
  EXPECT_EQ(child.wait_exit(), 0) << child.output();
  EXPECT_TRUE(same_attributes(child.attributes(), child.initial_attributes()));

  auto history = testing::read_text_file(state / "onnx-genai" / "history");
  ASSERT_TRUE(history.is_ok()) << history.status().message();
  EXPECT_EQ(*history, "hi there\nhi there!\n");
}

// Ctrl-C while a reply streams stops it and the REPL goes on; two Ctrl-C at the empty prompt exit.
// Ctrl-C is sent once the reply's text has begun to stream.
TEST_F(CliRun, TerminalCtrlCStopsAReply) {
  constexpr int kLimit = 3000;
  PtyProcess child({OG_CLI_PATH, "run", slow_dir_.string(), "--greedy", "--max-new-tokens", std::to_string(kLimit)},
                   local_.path() / "state");
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.wait_for("> ", 0)) << child.output();
  size_t from = child.output().size();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("hi there\r");
  ASSERT_TRUE(child.wait_for("hi there\x1b[K", from)) << child.output();
  ASSERT_TRUE(child.wait_for("\n", from)) << child.output();  // the submitted line ends
  ASSERT_TRUE(child.wait_for_output_beyond(child.output().find('\n', from) + 1)) << child.output();
  child.send("\x03");
  ASSERT_TRUE(child.wait_for(kStatsThenPrompt, from)) << child.output();
  const size_t stats = child.output().rfind("\n[", child.output().size() - 4);
  ASSERT_NE(stats, std::string::npos) << child.output();
  const int generated = std::atoi(child.output().c_str() + stats + 2);
  EXPECT_GT(generated, 0) << child.output();
  EXPECT_EQ(child.output().find("Ctrl-C again"), std::string::npos) << "the Ctrl-C reached the prompt";
  // Uninterrupted, the reply would have gone on: no eos among its first `generated` + 1 tokens.
  auto slow_model = genai::Model::load(slow_dir_.string());
  ASSERT_TRUE(slow_model.is_ok()) << slow_model.status().message();
  const Turn whole = fresh_reply(**slow_model, {{{"role", "user"}, {"content", "hi there"}}}, generated + 1);
  EXPECT_EQ(whole.tokens.size(), whole.prompt.size() + static_cast<size_t>(generated) + 1) << "it ended by itself";

  from = child.output().size();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("\x03");
  ASSERT_TRUE(child.wait_for("Ctrl-C again", from)) << child.output();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("\x03");
  EXPECT_EQ(child.wait_exit(), 0) << child.output();
  EXPECT_TRUE(same_attributes(child.attributes(), child.initial_attributes()));
}

// SIGTERM at the prompt (raw mode) ends the process by that signal with the terminal restored.
TEST_F(CliRun, TerminalRestoredOnSigterm) {
  PtyProcess child({OG_CLI_PATH, "run", dir_.string(), "--greedy"}, local_.path() / "state");
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.wait_for("> ", 0)) << child.output();
  ASSERT_TRUE(child.wait_for_mode(false));
  child.send("half a li");
  ASSERT_TRUE(child.wait_for("half a li", 0)) << child.output();
  child.signal(SIGTERM);
  EXPECT_EQ(child.wait_exit(), -1) << child.output();
  EXPECT_EQ(child.terminating_signal(), SIGTERM);
  EXPECT_TRUE(same_attributes(child.attributes(), child.initial_attributes()));
}

}  // namespace
}  // namespace onnx_genai
