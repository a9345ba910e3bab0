// A small line editor for the `run` REPL on a terminal (no readline: it is not among our
// dependencies). The editing logic (KeyDecoder: bytes -> keys; LineEditState: buffer, cursor
// and history under keys) does no I/O and is unit-tested; LineEditor puts the terminal in raw
// mode only while it reads a line (an RAII guard restores it on every return path) and redraws.
//
// Keys: printable text (UTF-8; the cursor moves by code point), Left/Right (Ctrl-B/Ctrl-F),
// Home/End (Ctrl-A/Ctrl-E), Backspace, Delete, Ctrl-U (erase to the start), Ctrl-K (erase to the
// end), Ctrl-W (erase the word before the cursor), Up/Down (history), Enter, Ctrl-D (end of
// input on an empty line, else Delete), Ctrl-C (cancel the line). Wide East Asian characters
// and emoji count as two columns, combining marks as none; lines wider than the terminal are
// not handled (the redraw assumes one row).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace onnx_genai::cli {

enum class KeyCode {
  kText,  // `text` holds one code point
  kEnter, kLeft, kRight, kHome, kEnd, kBackspace, kDelete, kUp, kDown,
  kEraseToStart, kEraseToEnd, kEraseWord, kEndOfInput, kInterrupt,
};

struct Key {
  KeyCode code = KeyCode::kText;
  std::string text;
};

// Bytes read from a terminal -> keys: control bytes, CSI / SS3 escape sequences (unknown ones are
// swallowed whole), UTF-8 code points (invalid bytes are dropped).
class KeyDecoder {
 public:
  std::optional<Key> feed(unsigned char byte);

 private:
  std::optional<Key> finish_escape();
  std::optional<Key> feed_utf8(unsigned char byte);

  std::string pending_;  // an unfinished escape sequence or code point
};

// Entered lines, oldest first, at most `limit` (the oldest drop out); no empty lines and no
// repeat of the newest one.
class History {
 public:
  explicit History(size_t limit) : limit_(limit) {}
  void add(const std::string& line);
  const std::vector<std::string>& entries() const { return entries_; }

  // One entry per line; a missing or unreadable file gives an empty history.
  void load(const std::string& path);
  // Writes the entries, creating the folder; returns false on failure (which callers may ignore).
  bool save(const std::string& path) const;

 private:
  size_t limit_;
  std::vector<std::string> entries_;
};

enum class EditOutcome { kEditing, kSubmit, kEndOfInput, kCancel };

// The line being edited: `cursor` is a byte offset at a code point boundary. Submitting adds the
// line to the history; Up/Down walk the history and come back to the unsubmitted draft.
class LineEditState {
 public:
  explicit LineEditState(History& history) : history_(history), history_pos_(history.entries().size()) {}

  EditOutcome apply(const Key& key);

  const std::string& buffer() const { return buffer_; }
  size_t cursor() const { return cursor_; }

 private:
  size_t previous_boundary(size_t at) const;
  size_t next_boundary(size_t at) const;
  void erase(size_t from, size_t to);
  void recall(size_t position);

  History& history_;
  std::string buffer_;
  size_t cursor_ = 0;
  size_t history_pos_;  // == entries().size() while editing the draft
  std::string draft_;
};

// Terminal columns of UTF-8 text (see the header comment for what counts as wide).
size_t display_width(const std::string& text);

// $XDG_STATE_HOME/onnx-genai/history, else ~/.local/state/onnx-genai/history; empty when neither
// variable is set.
std::string default_history_path();

// Reads lines from a terminal with editing and history.
class LineEditor {
 public:
  enum class Status { kLine, kEndOfInput, kCancelled };
  struct ReadResult {
    Status status = Status::kEndOfInput;
    std::string line;
  };

  // `history_path` may be empty (no persistence). The history file is read now.
  LineEditor(int in_fd, int out_fd, std::string history_path, size_t history_limit = 500);

  // Shows `prompt` and edits a line until Enter, Ctrl-D on an empty line, or Ctrl-C. A read error
  // or a closed terminal reads as end of input.
  ReadResult read_line(const std::string& prompt);

 private:
  void redraw(const std::string& prompt, const LineEditState& state) const;
  void write_text(const std::string& text) const;

  int in_fd_, out_fd_;
  std::string history_path_;
  History history_;
};

}  // namespace onnx_genai::cli
