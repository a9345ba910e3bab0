// The `run` REPL's line editor without a terminal: byte sequences as a terminal sends them
// (VT100/xterm escape sequences, control bytes, UTF-8) through KeyDecoder into LineEditState,
// checked against the buffer, cursor and history that the keys mean; the history file.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/line_editor.h"
#include "oracle_io.h"

namespace onnx_genai::cli {
namespace {

constexpr const char* kLeft = "\x1b[D";
constexpr const char* kRight = "\x1b[C";
constexpr const char* kUp = "\x1b[A";
constexpr const char* kDown = "\x1b[B";

// Feeds `bytes` through a decoder into `state`; returns the outcome of the last key.
EditOutcome type(LineEditState& state, const std::string& bytes) {
  KeyDecoder decoder;
  EditOutcome last = EditOutcome::kEditing;
  for (const char byte : bytes) {
    if (auto key = decoder.feed(static_cast<unsigned char>(byte))) last = state.apply(*key);
  }
  return last;
}

struct Edited {
  std::string buffer;
  size_t cursor;
  EditOutcome outcome;
};

Edited edit(const std::string& bytes, History& history) {
  LineEditState state(history);
  const EditOutcome outcome = type(state, bytes);
  return {state.buffer(), state.cursor(), outcome};
}

Edited edit(const std::string& bytes) {
  History history(500);
  return edit(bytes, history);
}

TEST(LineEditor, InsertsAtTheCursor) {
  const Edited e = edit(std::string("helo") + kLeft + "l");
  EXPECT_EQ(e.buffer, "hello");
  EXPECT_EQ(e.cursor, 4u);
  EXPECT_EQ(e.outcome, EditOutcome::kEditing);
  EXPECT_EQ(edit(std::string("bc") + "\x01" + "a" + "\x05" + "d").buffer, "abcd");       // Ctrl-A, Ctrl-E
  EXPECT_EQ(edit(std::string("bc") + "\x1b[H" + "a" + "\x1b[F" + "d").buffer, "abcd");   // Home, End
  EXPECT_EQ(edit(std::string("bc") + "\x1b[1~" + "a" + "\x1b[4~" + "d").buffer, "abcd");  // Home, End (vt220)
  EXPECT_EQ(edit(std::string("bc") + "\x1bOH" + "a" + "\x1bOF" + "d").buffer, "abcd");   // Home, End (SS3)
  EXPECT_EQ(edit(std::string("ac") + "\x02" + "b" + "\x06" + "d").buffer, "abcd");       // Ctrl-B, Ctrl-F
}

TEST(LineEditor, CursorStaysInsideTheLine) {
  Edited e = edit(std::string("ab") + kLeft + kLeft + kLeft + "x");
  EXPECT_EQ(e.buffer, "xab");
  EXPECT_EQ(e.cursor, 1u);
  e = edit(std::string("ab") + kRight + kRight + "y");
  EXPECT_EQ(e.buffer, "aby");
  EXPECT_EQ(edit(std::string("\x7f\x1b[3~") + "z").buffer, "z");  // Backspace, Delete on nothing
}

TEST(LineEditor, ErasesCharactersWordsAndLineParts) {
  EXPECT_EQ(edit("abc\x7f").buffer, "ab");                             // Backspace (DEL)
  EXPECT_EQ(edit("abc\x08").buffer, "ab");                             // Backspace (Ctrl-H)
  EXPECT_EQ(edit(std::string("abc") + kLeft + kLeft + "\x1b[3~").buffer, "ac");  // Delete
  EXPECT_EQ(edit(std::string("abc") + kLeft + "\x04").buffer, "ab");   // Ctrl-D on text deletes
  Edited e = edit(std::string("hello world") + kLeft + kLeft + "\x15");  // Ctrl-U
  EXPECT_EQ(e.buffer, "ld");
  EXPECT_EQ(e.cursor, 0u);
  e = edit(std::string("hello world") + "\x01" + kRight + "\x0b");  // Ctrl-K
  EXPECT_EQ(e.buffer, "h");
  EXPECT_EQ(e.cursor, 1u);
  EXPECT_EQ(edit("one two  three  \x17").buffer, "one two  ");  // Ctrl-W takes the spaces too
  EXPECT_EQ(edit(std::string("one two") + kLeft + kLeft + "\x17").buffer, "one wo");
}

// "aé中😀" is 1 + 2 + 3 + 4 bytes: Left/Backspace/Delete take whole code points.
TEST(LineEditor, MovesAndErasesByCodePoint) {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";
  Edited e = edit(text + kLeft);
  EXPECT_EQ(e.cursor, 6u);
  e = edit(text + kLeft + kLeft + "|");
  EXPECT_EQ(e.buffer, "a\xc3\xa9|\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_EQ(edit(text + "\x7f").buffer, "a\xc3\xa9\xe4\xb8\xad");
  EXPECT_EQ(edit(text + "\x7f\x7f").buffer, "a\xc3\xa9");
  EXPECT_EQ(edit(text + "\x01" + kRight + "\x1b[3~").buffer, "a\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_EQ(edit(text + "\x01" + kRight + kRight + kRight + "|").buffer, "a\xc3\xa9\xe4\xb8\xad|\xf0\x9f\x98\x80");
  // A broken sequence and stray continuation bytes are dropped; the next character survives.
  EXPECT_EQ(edit("\xc3x\x80y").buffer, "xy");
  EXPECT_EQ(display_width(text), 1u + 1u + 2u + 2u);
  EXPECT_EQ(display_width("e\xcc\x81"), 1u);  // e + combining acute
}

TEST(LineEditor, UnknownEscapeSequencesAreSwallowed) {
  EXPECT_EQ(edit(std::string("a") + "\x1b[1;5C" + "\x1b[15~" + "\x1b" + "x" + "b").buffer, "ab");
  EXPECT_EQ(edit(std::string("a\x0c\x07") + "b").buffer, "ab");  // Ctrl-L, bell: nothing
}

TEST(LineEditor, EnterCtrlDAndCtrlCEndTheLine) {
  History history(500);
  Edited e = edit("hi\r", history);
  EXPECT_EQ(e.outcome, EditOutcome::kSubmit);
  EXPECT_EQ(e.buffer, "hi");
  EXPECT_EQ(edit("\x04").outcome, EditOutcome::kEndOfInput);
  EXPECT_EQ(edit("x\x04").outcome, EditOutcome::kEditing);
  e = edit("half\x03", history);
  EXPECT_EQ(e.outcome, EditOutcome::kCancel);
  EXPECT_EQ(e.buffer, "half");
  EXPECT_EQ(history.entries(), std::vector<std::string>{"hi"});  // a cancelled line is not kept
}

TEST(LineEditor, UpAndDownWalkTheHistoryAndKeepTheDraft) {
  History history(500);
  edit("first\r", history);
  edit("second\r", history);
  edit("second\r", history);  // no repeat of the newest
  edit("\r", history);        // no empty lines
  EXPECT_EQ(history.entries(), (std::vector<std::string>{"first", "second"}));

  Edited e = edit(std::string("dra") + kUp, history);
  EXPECT_EQ(e.buffer, "second");
  EXPECT_EQ(e.cursor, 6u);
  EXPECT_EQ(edit(std::string("dra") + kUp + kUp + kUp, history).buffer, "first");
  EXPECT_EQ(edit(std::string("dra") + kUp + kUp + kDown + kDown + "ft", history).buffer, "draft");
  EXPECT_EQ(edit(std::string(kDown) + "x", history).buffer, "x");
  // A recalled line edited and submitted becomes the newest entry; the old one stays.
  e = edit(std::string(kUp) + kUp + "!" + "\r", history);
  EXPECT_EQ(e.buffer, "first!");
  EXPECT_EQ(history.entries(), (std::vector<std::string>{"first", "second", "first!"}));
}

TEST(LineEditor, HistoryKeepsTheNewestAndRoundTripsThroughAFile) {
  History history(3);
  for (const char* line : {"a", "b", "c", "d"}) history.add(line);
  EXPECT_EQ(history.entries(), (std::vector<std::string>{"b", "c", "d"}));

  testing::ScopedTempDir dir;
  const std::string path = (dir.path() / "state" / "onnx-genai" / "history").string();
  ASSERT_TRUE(history.save(path));
  History loaded(2);
  loaded.load(path);
  EXPECT_EQ(loaded.entries(), (std::vector<std::string>{"c", "d"}));

  History missing(3);
  missing.load((dir.path() / "absent").string());
  EXPECT_TRUE(missing.entries().empty());
  std::ofstream(dir.path() / "file") << "x";
  EXPECT_FALSE(history.save((dir.path() / "file" / "history").string()));  // a file where the folder goes
}

TEST(LineEditor, HistoryPathFollowsXdgStateHome) {
  const char* saved_state = std::getenv("XDG_STATE_HOME");
  const std::string saved = saved_state ? saved_state : "";
  setenv("XDG_STATE_HOME", "/tmp/state", 1);
  EXPECT_EQ(default_history_path(), "/tmp/state/onnx-genai/history");
  unsetenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  if (home) {
    EXPECT_EQ(default_history_path(), std::string(home) + "/.local/state/onnx-genai/history");
  }
  if (saved_state) setenv("XDG_STATE_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace onnx_genai::cli
