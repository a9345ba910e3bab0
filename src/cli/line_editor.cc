#include "cli/line_editor.h"

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

namespace onnx_genai::cli {

namespace {

constexpr unsigned char kEscape = 0x1b;

constexpr unsigned char ctrl(char letter) { return static_cast<unsigned char>(letter & 0x1f); }

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Bytes of the UTF-8 sequence a lead byte starts; 0 for a byte that cannot start one.
size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

Key key(KeyCode code) { return Key{code, {}}; }

std::optional<Key> control_key(unsigned char byte) {
  switch (byte) {
    case '\r': case '\n': return key(KeyCode::kEnter);
    case 0x7f: case ctrl('H'): return key(KeyCode::kBackspace);
    case ctrl('A'): return key(KeyCode::kHome);
    case ctrl('E'): return key(KeyCode::kEnd);
    case ctrl('B'): return key(KeyCode::kLeft);
    case ctrl('F'): return key(KeyCode::kRight);
    case ctrl('P'): return key(KeyCode::kUp);
    case ctrl('N'): return key(KeyCode::kDown);
    case ctrl('U'): return key(KeyCode::kEraseToStart);
    case ctrl('K'): return key(KeyCode::kEraseToEnd);
    case ctrl('W'): return key(KeyCode::kEraseWord);
    case ctrl('D'): return key(KeyCode::kEndOfInput);
    case ctrl('C'): return key(KeyCode::kInterrupt);
    case '\t': return Key{KeyCode::kText, "\t"};
    default: return std::nullopt;  // other control bytes do nothing
  }
}

// The code point of the complete UTF-8 sequence of `length` bytes at `at`.
char32_t decode_code_point(const std::string& text, size_t at, size_t length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  if (length == 1) return byte(0);
  char32_t cp = byte(0) & (0xFF >> (length + 1));
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (byte(i) & 0x3F);
  return cp;
}

// Columns of one code point: East Asian Wide/Fullwidth blocks and emoji take two, combining
// marks none (the common ranges; rarer ones count as one).
size_t code_point_width(char32_t cp) {
  constexpr std::pair<char32_t, char32_t> kZeroWidth[] = {{0x0300, 0x036F}, {0x200B, 0x200F}, {0xFE00, 0xFE0F}};
  constexpr std::pair<char32_t, char32_t> kWide[] = {
      {0x1100, 0x115F}, {0x2E80, 0x303E}, {0x3041, 0xA4CF},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},  {0xFE30, 0xFE4F},
      {0xFF00, 0xFF60}, {0xFFE0, 0xFFE6}, {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0x20000, 0x3FFFD}};
  const auto in = [cp](const auto& ranges) {
    return std::any_of(std::begin(ranges), std::end(ranges),
                       [cp](const auto& range) { return cp >= range.first && cp <= range.second; });
  };
  if (in(kZeroWidth)) return 0;
  return in(kWide) ? 2 : 1;
}

// What a termination signal restores while a RawMode is active (one at a time).
int g_raw_fd = -1;
termios g_cooked_attributes{};

// SIGTERM or SIGHUP while in raw mode: restore the terminal, then die of the signal as before
// (it is blocked inside the handler, so the re-raised one lands once the handler returns).
extern "C" void restore_terminal_and_reraise(int signal) {
  tcsetattr(g_raw_fd, TCSANOW, &g_cooked_attributes);  // async-signal-safe
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

constexpr int kTerminatingSignals[] = {SIGTERM, SIGHUP};

// The terminal in raw mode (no echo, no line buffering, Ctrl-C as a byte) for its lifetime; the
// original attributes come back on destruction or on a terminating signal.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~static_cast<tcflag_t>(ICRNL | IXON | BRKINT | ISTRIP | INPCK);
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    g_raw_fd = fd_;
    g_cooked_attributes = saved_;
    struct sigaction restore {};
    restore.sa_handler = restore_terminal_and_reraise;
    sigemptyset(&restore.sa_mask);
    for (size_t i = 0; i < std::size(kTerminatingSignals); ++i) {
      sigaction(kTerminatingSignals[i], &restore, &previous_[i]);
    }
    handlers_installed_ = true;
    raw_ = tcsetattr(fd_, TCSADRAIN, &raw) == 0;
  }
  ~RawMode() {
    if (raw_) tcsetattr(fd_, TCSADRAIN, &saved_);
    if (!handlers_installed_) return;
    for (size_t i = 0; i < std::size(kTerminatingSignals); ++i) {
      sigaction(kTerminatingSignals[i], &previous_[i], nullptr);
    }
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  int fd_;
  termios saved_{};
  struct sigaction previous_[std::size(kTerminatingSignals)] {};
  bool handlers_installed_ = false;
  bool raw_ = false;
};

}  // namespace

std::optional<Key> KeyDecoder::feed(unsigned char byte) {
  if (!pending_.empty() && static_cast<unsigned char>(pending_[0]) == kEscape) {
    pending_ += static_cast<char>(byte);
    return finish_escape();
  }
  if (!pending_.empty() || byte >= 0x80) return feed_utf8(byte);
  if (byte == kEscape) {
    pending_.assign(1, static_cast<char>(byte));
    return std::nullopt;
  }
  if (byte < 0x20 || byte == 0x7f) return control_key(byte);
  return Key{KeyCode::kText, std::string(1, static_cast<char>(byte))};
}

// ESC [ params final, or ESC O final. Anything else after ESC (Alt+key) is dropped.
std::optional<Key> KeyDecoder::finish_escape() {
  const char introducer = pending_[1];
  if (introducer != '[' && introducer != 'O') {
    pending_.clear();
    return std::nullopt;
  }
  if (pending_.size() == 2) return std::nullopt;
  const char last = pending_.back();
  if (!(last >= 0x40 && last <= 0x7e)) {
    if (pending_.size() > 16) pending_.clear();  // runaway sequence
    return std::nullopt;
  }
  const std::string params = pending_.substr(2, pending_.size() - 3);
  pending_.clear();
  switch (last) {
    case 'A': return key(KeyCode::kUp);
    case 'B': return key(KeyCode::kDown);
    case 'C': return key(KeyCode::kRight);
    case 'D': return key(KeyCode::kLeft);
    case 'H': return key(KeyCode::kHome);
    case 'F': return key(KeyCode::kEnd);
    case '~': {
      const std::string number = params.substr(0, params.find(';'));
      if (number == "1" || number == "7") return key(KeyCode::kHome);
      if (number == "4" || number == "8") return key(KeyCode::kEnd);
      if (number == "3") return key(KeyCode::kDelete);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<Key> KeyDecoder::feed_utf8(unsigned char byte) {
  if (pending_.empty()) {
    if (utf8_length(byte) < 2) return std::nullopt;  // a stray continuation or invalid lead byte
    pending_.assign(1, static_cast<char>(byte));
    return std::nullopt;
  }
  if (!is_continuation(byte)) {  // the sequence broke off: drop it and start over with this byte
    pending_.clear();
    return feed(byte);
  }
  pending_ += static_cast<char>(byte);
  if (pending_.size() < utf8_length(static_cast<unsigned char>(pending_[0]))) return std::nullopt;
  Key text{KeyCode::kText, std::move(pending_)};
  pending_.clear();
  return text;
}

void History::add(const std::string& line) {
  if (line.empty() || (!entries_.empty() && entries_.back() == line)) return;
  entries_.push_back(line);
  if (entries_.size() > limit_) entries_.erase(entries_.begin(), entries_.end() - static_cast<std::ptrdiff_t>(limit_));
}

void History::load(const std::string& path) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) add(line);
}

bool History::save(const std::string& path) const {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream file(path, std::ios::trunc);
  for (const std::string& entry : entries_) file << entry << '\n';
  file.flush();
  return static_cast<bool>(file);
}

size_t LineEditState::previous_boundary(size_t at) const {
  while (at > 0 && is_continuation(static_cast<unsigned char>(buffer_[--at]))) {
  }
  return at;
}

size_t LineEditState::next_boundary(size_t at) const {
  if (at >= buffer_.size()) return buffer_.size();
  ++at;
  while (at < buffer_.size() && is_continuation(static_cast<unsigned char>(buffer_[at]))) ++at;
  return at;
}

void LineEditState::erase(size_t from, size_t to) {
  buffer_.erase(from, to - from);
  cursor_ = from;
}

void LineEditState::recall(size_t position) {
  if (history_pos_ == history_.entries().size()) draft_ = buffer_;
  history_pos_ = position;
  buffer_ = position == history_.entries().size() ? draft_ : history_.entries()[position];
  cursor_ = buffer_.size();
}

EditOutcome LineEditState::apply(const Key& key) {
  switch (key.code) {
    case KeyCode::kText:
      buffer_.insert(cursor_, key.text);
      cursor_ += key.text.size();
      break;
    case KeyCode::kEnter:
      history_.add(buffer_);
      return EditOutcome::kSubmit;
    case KeyCode::kLeft: cursor_ = previous_boundary(cursor_); break;
    case KeyCode::kRight: cursor_ = next_boundary(cursor_); break;
    case KeyCode::kHome: cursor_ = 0; break;
    case KeyCode::kEnd: cursor_ = buffer_.size(); break;
    case KeyCode::kBackspace: erase(previous_boundary(cursor_), cursor_); break;
    case KeyCode::kDelete: erase(cursor_, next_boundary(cursor_)); break;
    case KeyCode::kEraseToStart: erase(0, cursor_); break;
    case KeyCode::kEraseToEnd: erase(cursor_, buffer_.size()); break;
    case KeyCode::kEraseWord: {
      size_t start = cursor_;
      while (start > 0 && buffer_[start - 1] == ' ') --start;
      while (start > 0 && buffer_[start - 1] != ' ') --start;
      erase(start, cursor_);
      break;
    }
    case KeyCode::kUp:
      if (history_pos_ > 0) recall(history_pos_ - 1);
      break;
    case KeyCode::kDown:
      if (history_pos_ < history_.entries().size()) recall(history_pos_ + 1);
      break;
    case KeyCode::kEndOfInput:
      if (buffer_.empty()) return EditOutcome::kEndOfInput;
      erase(cursor_, next_boundary(cursor_));
      break;
    case KeyCode::kInterrupt: return EditOutcome::kCancel;
  }
  return EditOutcome::kEditing;
}

size_t display_width(const std::string& text) {
  size_t columns = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t length = std::max<size_t>(1, utf8_length(static_cast<unsigned char>(text[at])));
    if (at + length > text.size()) break;
    columns += code_point_width(decode_code_point(text, at, length));
    at += length;
  }
  return columns;
}

std::string default_history_path() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return std::string(state) + "/onnx-genai/history";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/state/onnx-genai/history";
  return "";
}

LineEditor::LineEditor(int in_fd, int out_fd, std::string history_path, size_t history_limit)
    : in_fd_(in_fd), out_fd_(out_fd), history_path_(std::move(history_path)), history_(history_limit) {
  if (!history_path_.empty()) history_.load(history_path_);
}

void LineEditor::write_text(const std::string& text) const {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(out_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away; reading will notice
    done += static_cast<size_t>(n);
  }
}

// Carriage return, prompt and line, erase the rest of the row, then back to the cursor's column.
void LineEditor::redraw(const std::string& prompt, const LineEditState& state) const {
  std::string frame = "\r" + prompt + state.buffer() + "\x1b[K";
  const size_t back = display_width(state.buffer().substr(state.cursor()));
  if (back > 0) frame += "\x1b[" + std::to_string(back) + "D";
  write_text(frame);
}

LineEditor::ReadResult LineEditor::read_line(const std::string& prompt) {
  RawMode raw(in_fd_);
  LineEditState state(history_);
  KeyDecoder decoder;
  redraw(prompt, state);
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(in_fd_, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      write_text("\r\n");
      return {Status::kEndOfInput, {}};
    }
    const std::optional<Key> key = decoder.feed(byte);
    if (!key) continue;
    const EditOutcome outcome = state.apply(*key);
    if (outcome == EditOutcome::kEditing) {
      redraw(prompt, state);
      continue;
    }
    write_text(outcome == EditOutcome::kCancel ? "^C\r\n" : "\r\n");
    if (outcome == EditOutcome::kSubmit && !history_path_.empty()) history_.save(history_path_);  // failure ignored
    if (outcome == EditOutcome::kSubmit) return {Status::kLine, state.buffer()};
    if (outcome == EditOutcome::kCancel) return {Status::kCancelled, state.buffer()};
    return {Status::kEndOfInput, {}};
  }
}

}  // namespace onnx_genai::cli
