// The grammar as a byte automaton, determinized lazily (as a regex engine's lazy DFA is).
//
// A parser configuration is a stack of grammar positions: the top is the next symbol to match,
// each frame below is where to continue when the rule above it ends. Stacks are hash-consed
// (a node is a position plus the id of the node below), so equal stacks have equal ids and a
// set of stacks, the nondeterministic parser's state, is a sorted vector of ids. Each distinct
// set gets a state number; its 256 successors are computed on first use (once per byte kind,
// Grammar::byte_kind) and kept, so text the
// parser has seen before (the inside of a string, a repeated array item) costs one table
// lookup per byte. A reference in tail position returns straight to its caller's caller, so
// repetition by right recursion keeps stacks, and therefore states, from growing.
//
// Lexemes (grammar.h) are read by a second automaton over the same grammar, one started per
// lexeme: a configuration with a lexeme on top holds that automaton's state. Where the lexeme
// may end, the parse goes on with a guard: the lexeme's state, which must never accept again
// (the text that follows must not extend the match, so the split is the longest match). A
// configuration is thus (stack, lexeme state, guard), packed into 64 bits. A lazy lexeme
// (LexemeMode) ends at its first match, unguarded, and guards what began beside it (cut_by_lazy);
// one with bytes to re-read (a stop) hands what follows them to a walk over those bytes
// (reread()), where every parse must take them.
//
// Tokens the grammar names (Grammar::tokens, bound to ids: one token or a set) are symbols
// beside the 256 bytes: next_token() steps by one, kept in a map rather than in the byte rows,
// so grammars without them pay nothing on the byte path.
//
// Every call but row(), known_next() and accepting() must be serialized by the owner
// (CompiledState's mutex): they compute and add states. Those three read the transition table,
// which any thread may do meanwhile: rows never move once made (chunks of rows behind a fixed
// directory, each row with its state's accepting flag) and their entries are atomic, a successor
// published only after its own row exists, so a mask walk over known states takes no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constraints/flat_map.h"
#include "constraints/grammar.h"

namespace onnx_genai::constraints {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  // Bounds on what one grammar may make the parser hold; past them a step fails (hostile or
  // highly ambiguous grammars) rather than exhausting memory.
  static constexpr size_t kMaxStacksPerState = 4096;
  static constexpr size_t kMaxNodes = size_t{1} << 22;
  static constexpr size_t kMaxStates = size_t{1} << 18;

  explicit Automaton(std::shared_ptr<const Grammar> grammar);
  ~Automaton();

  // The state before any byte.
  Result<int32_t> start() { return start_at(0); }
  // The state after `byte`, or kDead when no sentence continues that way.
  Result<int32_t> next(int32_t state, uint8_t byte) {
    const int32_t known = known_next(state, byte);
    return known != kUnknown ? known : compute_next(state, byte);
  }
  // The state after `byte` if computed already, else kUnknown; safe beside the other calls.
  int32_t known_next(int32_t state, uint8_t byte) const {
    if (state == kDead) return kDead;  // the empty language starts dead
    return row(state)[byte].load(std::memory_order_acquire);
  }
  // The state after token `id` taken by id (a token the grammar names or a set holding it,
  // bound), or kDead.
  Result<int32_t> next_token(int32_t state, int32_t id);
  // The grammar's tokens (indexes into Grammar::tokens) that may come next (repeats possible).
  std::vector<int32_t> token_symbols_at(int32_t state) const;
  // The state whose parses are those of `a` and of `b` (a token read both by id and by bytes).
  Result<int32_t> merge(int32_t a, int32_t b);
  const Grammar& grammar() const { return *grammar_; }
  using Row = std::array<std::atomic<int32_t>, 256>;
  // A state's successors by byte, kUnknown where not computed yet (the mask walk reads these
  // directly, with acquire loads). Rows stay where they are while states are added.
  const Row& row(int32_t state) const { return row_at(state); }
  static constexpr int32_t kUnknown = -2;
  // The inside of a string: from `state`, the ASCII bytes `stays` and (when `unicode`) every
  // UTF-8 character beyond ASCII lead one way, to a state that is again such a step (other
  // characters beyond ASCII are refused), for `chars` characters (then none may come: a
  // maxLength) or without end (-1). A mask there takes the tokens spelled with those from a
  // table (TokenTrie::inside). nullptr when `state` is no such run. Runs longer than
  // `enough` characters count as endless. Computed once per state.
  struct StringRun {
    ByteSet stays;
    bool unicode;
    int32_t chars;
    // The state after `c` of the run's characters (c <= chars where bounded); kDead past a
    // chain cut at `enough`.
    int32_t after(int32_t c) const;
    // The run's states from its first: this one is chain[offset]; an unbounded run's chain
    // returns to chain[loop] after its last (loop -1: it ends).
    std::shared_ptr<const std::vector<int32_t>> chain;
    int32_t offset = 0;
    int32_t loop = -1;
  };
  Result<const StringRun*> string_run(int32_t state, int32_t enough);
  // An ASCII-only run of fewer bytes is left to the mask's walk: the trie prunes it early, and
  // each table costs a pass over the vocabulary.
  static constexpr size_t kMinRunBytes = 32;
  // Whether `text`, read from the start, is a whole sentence.
  Result<bool> accepts(std::string_view text);
  // Whether the text so far is a whole sentence.
  bool accepting(int32_t state) const {
    if (state == kDead) return false;
    const auto s = static_cast<size_t>(state);
    return chunks_[s / kRowsPerChunk].load(std::memory_order_acquire)->accepting[s % kRowsPerChunk];
  }
  // Whether some byte or token continues the text (a state may accept and still be extensible).
  bool extensible(int32_t state) const { return state != kDead && !states_[static_cast<size_t>(state)].configs.empty(); }
  size_t state_count() const { return states_.size(); }

 private:
  struct Node {
    int32_t position;
    int32_t below;  // node id, or -1 at the bottom
  };
  // One parse alive: a stack with a byte class or lexeme on top; `lex` the lexer's state when a
  // lexeme is on top (else -1); `guard` the set (guards_) of lexer states that must not accept.
  struct Config {
    int32_t node;
    int32_t lex;
    int32_t guard;
  };
  struct State {
    std::vector<uint64_t> configs;  // sorted packed configurations
  };
  struct VectorHash {
    template <typename T>
    size_t operator()(const std::vector<T>& v) const;
  };
  static constexpr int kLexBits = 19;    // lex + 1 <= kMaxStates
  static constexpr int kGuardBits = 23;  // beside 22 bits of node id
  static constexpr int32_t kViolated = -1;
  static uint64_t pack(int32_t node, int32_t lex, int32_t guard) {
    return static_cast<uint64_t>(node) | static_cast<uint64_t>(lex + 1) << 22 | static_cast<uint64_t>(guard) << (22 + kLexBits);
  }
  static Config unpack(uint64_t c) {
    return {static_cast<int32_t>(c & ((1u << 22) - 1)), static_cast<int32_t>((c >> 22) & ((1u << kLexBits) - 1)) - 1,
            static_cast<int32_t>(c >> (22 + kLexBits))};
  }

  Result<int32_t> start_at(int32_t position);
  Result<int32_t> compute_next(int32_t state, uint8_t byte);
  // A lexeme ended whose stop bytes are to be re-read: the parse after it (the frame of the
  // lexeme's symbol), its guard, and the bytes.
  struct Reread {
    int32_t node;
    int32_t guard;
    const std::string* bytes;
  };
  // Stops re-read inside stops re-read deeper than this fail (a walk re-reading a stop whose
  // own walk ends another).
  static constexpr int kMaxRereadDepth = 8;
  // The configurations after `byte` from `from`, added to `out`; `depth` counts the re-reads
  // this step is inside.
  Status step(const std::vector<uint64_t>& from, uint8_t byte, int depth, std::vector<uint64_t>& out, bool& accepting);
  // What a step makes: configurations begun at the new position, lexemes going on, whether the
  // text may end, and stops to re-read once the step's closures are done (they share seen_).
  struct StepOut {
    std::vector<uint64_t> begun;
    std::vector<uint64_t> going_on;
    bool accepting = false;
    std::vector<Reread> rereads;
  };
  // A configuration with a lexeme on top, after `byte`: inside the lexeme still, and where the
  // lexeme may end, the parse after it.
  Status step_lexeme(const Config& c, int32_t guard, uint8_t byte, StepOut& next);
  Status reread(const Reread& r, int depth, std::vector<uint64_t>& out, bool& accepting);
  // Whether `configs` take `byte` and nothing else (no other byte, no token).
  bool forces(const std::vector<uint64_t>& configs, uint8_t byte) const;
  bool is_lazy_lexeme(const Config& c) const;
  // Configurations that began at one position: those beside a lazy lexeme die where it first
  // matches (its lexer state joins their guards).
  Status cut_by_lazy(std::vector<uint64_t>& begun);
  Result<int32_t> node(int32_t position, int32_t below);
  // Expands (position, below) until byte classes or lexemes are on top, adding those
  // configurations (under `guard`) to `out`.
  Status close(int32_t position, int32_t below, int32_t guard, std::vector<uint64_t>& out, bool& accepting);
  Result<int32_t> intern(std::vector<uint64_t> configs, bool accepting);
  void mark_dead_bytes(int32_t state);
  // Adds to `bytes` those some configuration of `state` takes first; false when that depends on
  // more than byte classes (a lexeme or a token on top).
  bool first_bytes(int32_t state, ByteSet& bytes) const;
  // The guard after `byte`: kViolated when a guarded lexeme would match longer.
  Result<int32_t> advance_guard(int32_t guard, uint8_t byte);
  Result<int32_t> intern_guard(std::vector<int32_t> lexer_states);
  Result<int32_t> join_guards(int32_t a, int32_t b);
  Result<bool> characters_lead(int32_t to, int32_t state, int8_t utf8);
  Result<int32_t> whole_character_step(int32_t state, ByteSet& stays);
  // The rule whose alternative starts at `position`, or -1.
  int32_t alternative_rule(int32_t position);
  // Whether `rule`'s alternatives are byte classes that take every character past ASCII whole.
  Result<bool> takes_every_character(int32_t rule);
  static bool is_class(int32_t code) { return code >= 0 && !Grammar::is_token(code) && !Grammar::is_lexeme(code); }
  Result<int32_t> run_step(int32_t state, bool first, StringRun& run);
  Automaton& lexer();

  std::shared_ptr<const Grammar> grammar_;
  bool has_lazy_ = false;  // a lazy lexeme in the grammar
  std::vector<Node> nodes_;
  FlatMap64 node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::vector<uint64_t>, int32_t, VectorHash> state_ids_[2];  // by accepting
  // state -> byte -> state, kDead or kUnknown: rows in chunks (64 KiB each, every entry
  // kUnknown until computed), found through a directory sized for kMaxStates, so that adding a
  // state neither moves nor copies a row another thread may be reading. Beside each row, its
  // state's accepting flag, written before the state's number is handed out.
  static constexpr size_t kRowsPerChunk = 64;
  struct Chunk {
    std::array<Row, kRowsPerChunk> rows;
    std::array<bool, kRowsPerChunk> accepting{};
  };
  std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
  Row& row_at(int32_t state) const {
    const auto s = static_cast<size_t>(state);
    return chunks_[s / kRowsPerChunk].load(std::memory_order_acquire)->rows[s % kRowsPerChunk];
  }
  std::vector<std::unique_ptr<Chunk>> owned_chunks_;
  // Scratch of close(), kept to save allocations: frames to expand, and those expanded (under
  // seen_guard_): a frame is expanded when seen_ holds it with the current epoch, so that
  // forgetting them all is one increment.
  std::vector<std::pair<int32_t, int32_t>> work_;
  FlatMap64 seen_;
  int32_t seen_epoch_ = 0;
  int32_t seen_guard_ = 0;
  // Closures from here on share seen_ (guard 0).
  void start_closures() {
    ++seen_epoch_;
    seen_guard_ = 0;
  }
  std::unordered_map<int32_t, int32_t> starts_;  // start position -> state
  // The lexemes' automaton (created on first use), and the guards: sorted sets of its states,
  // guard 0 the empty set, each with its successors by byte (kUnknown until computed).
  std::unique_ptr<Automaton> lexer_;
  std::vector<std::vector<int32_t>> guards_{{}};
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> guard_ids_{{{}, 0}};
  std::vector<std::array<int32_t, 256>> guard_rows_;
  std::unordered_map<int32_t, std::unique_ptr<StringRun>> string_runs_;  // null: not a string's inside
  std::vector<int32_t> alternative_rules_;                  // position -> rule, -1 (built on first use)
  std::unordered_map<int32_t, bool> whole_character_rules_;  // rule -> takes_every_character
  std::unordered_map<uint64_t, int32_t> token_transitions_;                // (state << 32 | id) -> state
};

}  // namespace onnx_genai::constraints
