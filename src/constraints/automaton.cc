#include "constraints/automaton.h"

#include <algorithm>

#include "constraints/utf8.h"

namespace onnx_genai::constraints {

template <typename T>
size_t Automaton::VectorHash::operator()(const std::vector<T>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (const T x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {}
Automaton::~Automaton() = default;

Result<int32_t> Automaton::node(int32_t position, int32_t below) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) | static_cast<uint32_t>(below);
  const auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes) {
      node_ids_.erase(it);
      return OG_ERROR("grammar: the parser needs more than ", kMaxNodes, " stack frames (nesting too deep)");
    }
    nodes_.push_back(Node{position, below});
  }
  return it->second;
}

Result<Automaton*> Automaton::lexer() {
  if (!lexer_) lexer_ = std::make_unique<Automaton>(grammar_);
  return lexer_.get();
}

Status Automaton::close(int32_t position, int32_t below, int32_t guard, std::vector<uint64_t>& out, bool& accepting) {
  const std::vector<int32_t>& code = grammar_->code;
  std::vector<std::pair<int32_t, int32_t>>& work = work_;
  if (guard != seen_guard_) {  // what was expanded under another guard gave other configurations
    seen_.clear();
    seen_guard_ = guard;
  }
  work.assign(1, {position, below});
  while (!work.empty()) {
    auto [pos, stack] = work.back();
    work.pop_back();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(stack);
    if (!seen_.insert(key).second) continue;
    const int32_t c = code[static_cast<size_t>(pos)];
    if (c == Grammar::kEnd) {
      if (stack < 0) {
        accepting = true;
      } else {
        work.emplace_back(nodes_[static_cast<size_t>(stack)].position, nodes_[static_cast<size_t>(stack)].below);
      }
    } else if (Grammar::is_lexeme(c)) {
      OG_ASSIGN_OR_RETURN(Automaton* const lex, lexer());
      OG_ASSIGN_OR_RETURN(const int32_t first, lex->start_at(grammar_->lexeme_starts[static_cast<size_t>(c - Grammar::kLexemeBase)]));
      OG_ASSIGN_OR_RETURN(const int32_t id, node(pos, stack));
      if (first != kDead) out.push_back(pack(id, first, guard));
    } else if (c >= 0) {
      OG_ASSIGN_OR_RETURN(const int32_t id, node(pos, stack));
      out.push_back(pack(id, -1, guard));
    } else {
      // A reference in tail position returns to this frame's caller directly (no frame for
      // "the end of this alternative"), which keeps repetition from growing the stack.
      int32_t ret = stack;
      if (code[static_cast<size_t>(pos) + 1] != Grammar::kEnd) {
        OG_ASSIGN_OR_RETURN(ret, node(pos + 1, stack));
      }
      for (const int32_t start : grammar_->alternatives[static_cast<size_t>(Grammar::rule_of(c))]) {
        work.emplace_back(start, ret);
      }
    }
    if (out.size() > kMaxStacksPerState) {
      return OG_ERROR("grammar: more than ", kMaxStacksPerState, " parses alive at once (the grammar is too ambiguous)");
    }
  }
  return Status::ok();
}

Result<int32_t> Automaton::intern(std::vector<uint64_t> configs, bool accepting) {
  std::sort(configs.begin(), configs.end());
  configs.erase(std::unique(configs.begin(), configs.end()), configs.end());
  if (configs.empty() && !accepting) return kDead;
  auto& ids = state_ids_[accepting ? 1 : 0];
  auto it = ids.find(configs);
  if (it != ids.end()) return it->second;
  if (states_.size() >= kMaxStates) {
    return OG_ERROR("grammar: the parser reached more than ", kMaxStates, " distinct states");
  }
  const auto id = static_cast<int32_t>(states_.size());
  ids.emplace(configs, id);
  states_.push_back(State{std::move(configs), accepting});
  transitions_.push_back(std::make_unique<std::array<int32_t, 256>>());
  transitions_.back()->fill(kUnknown);
  return id;
}

Result<int32_t> Automaton::intern_guard(std::vector<int32_t> lexer_states) {
  std::sort(lexer_states.begin(), lexer_states.end());
  lexer_states.erase(std::unique(lexer_states.begin(), lexer_states.end()), lexer_states.end());
  auto it = guard_ids_.find(lexer_states);
  if (it != guard_ids_.end()) return it->second;
  if (guards_.size() >= (size_t{1} << kGuardBits)) {
    return OG_ERROR("grammar: more than ", size_t{1} << kGuardBits, " sets of lexemes awaiting their longest match");
  }
  const auto id = static_cast<int32_t>(guards_.size());
  guard_ids_.emplace(lexer_states, id);
  guards_.push_back(std::move(lexer_states));
  guard_rows_.resize(guards_.size());
  guard_rows_.back().fill(kUnknown);
  return id;
}

Result<int32_t> Automaton::advance_guard(int32_t guard, uint8_t byte) {
  if (guard == 0) return 0;
  const int32_t cached = guard_rows_[static_cast<size_t>(guard)][byte];
  if (cached != kUnknown) return cached;
  std::vector<int32_t> next;
  bool violated = false;
  for (const int32_t s : guards_[static_cast<size_t>(guard)]) {
    OG_ASSIGN_OR_RETURN(const int32_t t, lexer_->next(s, byte));
    violated = lexer_->accepting(t);  // the lexeme would match longer: that split was wrong
    if (violated) break;
    if (lexer_->extensible(t)) next.push_back(t);
  }
  int32_t result = kViolated;
  if (!violated) {
    OG_ASSIGN_OR_RETURN(result, intern_guard(std::move(next)));
  }
  for (const uint8_t same : grammar_->kind_bytes[grammar_->byte_kind[byte]]) guard_rows_[static_cast<size_t>(guard)][same] = result;
  return result;
}

Status Automaton::step_lexeme(const Config& c, int32_t guard, uint8_t byte, std::vector<uint64_t>& out, bool& accepting) {
  OG_ASSIGN_OR_RETURN(const int32_t lex, lexer_->next(c.lex, byte));
  if (lex == kDead) return Status::ok();
  const bool longer = lexer_->extensible(lex);
  if (longer) out.push_back(pack(c.node, lex, guard));
  if (!lexer_->accepting(lex)) return Status::ok();
  // The lexeme may end here if what follows never extends it: guarded by its state.
  int32_t after = guard;
  if (longer) {
    std::vector<int32_t> states = guards_[static_cast<size_t>(guard)];
    states.push_back(lex);
    OG_ASSIGN_OR_RETURN(after, intern_guard(std::move(states)));
  }
  const Node n = nodes_[static_cast<size_t>(c.node)];
  return close(n.position + 1, n.below, after, out, accepting);
}

// Whether every way of finishing the character begun (`utf8`, at `state`) leads back to `from`.
// Bytes the grammar does not tell apart go alike, so one byte per kind is tried.
Result<bool> Automaton::keeps_characters(int32_t from, int32_t state, int8_t utf8) {
  std::vector<bool> tried(grammar_->kind_bytes.size());
  for (int b = 0x80; b <= 0xFF; ++b) {
    const int8_t after = utf8::step(utf8, static_cast<uint8_t>(b));
    const uint8_t kind = grammar_->byte_kind[static_cast<size_t>(b)];
    if (after == utf8::kInvalid || (utf8 != utf8::kBoundary && tried[kind])) continue;
    tried[kind] = true;  // at a boundary each lead byte is tried: its own table row follows
    OG_ASSIGN_OR_RETURN(const int32_t next, this->next(state, static_cast<uint8_t>(b)));
    if (next == kDead || (after == utf8::kBoundary && next != from)) return false;
    if (after == utf8::kBoundary) continue;
    OG_ASSIGN_OR_RETURN(const bool kept, keeps_characters(from, next, after));
    if (!kept) return false;
  }
  return true;
}

Result<const ByteSet*> Automaton::string_loop(int32_t state) {
  if (auto it = string_loops_.find(state); it != string_loops_.end()) return it->second.get();
  std::unique_ptr<ByteSet> loop;
  OG_ASSIGN_OR_RETURN(const bool kept, keeps_characters(state, state, utf8::kBoundary));
  if (kept) {
    loop = std::make_unique<ByteSet>();
    for (const std::vector<uint8_t>& kind : grammar_->kind_bytes) {
      if (kind[0] >= 0x80) continue;
      OG_ASSIGN_OR_RETURN(const int32_t next, this->next(state, kind[0]));
      if (next != state) continue;
      for (const uint8_t b : kind) {
        if (b < 0x80) loop->set(b);
      }
    }
  }
  return string_loops_.emplace(state, std::move(loop)).first->second.get();
}

Result<int32_t> Automaton::start_at(int32_t position) {
  if (auto it = starts_.find(position); it != starts_.end()) return it->second;
  std::vector<uint64_t> configs;
  bool accepting = false;
  seen_.clear();
  seen_guard_ = 0;
  OG_RETURN_IF_ERROR(close(position, -1, 0, configs, accepting));
  OG_ASSIGN_OR_RETURN(const int32_t start, intern(std::move(configs), accepting));
  starts_.emplace(position, start);
  return start;
}

Result<int32_t> Automaton::compute_next(int32_t state, uint8_t byte) {
  std::vector<uint64_t> configs;
  bool accepting = false;
  // Copied: close() may add states' nodes, and intern() grows states_.
  const std::vector<uint64_t> from = states_[static_cast<size_t>(state)].configs;
  seen_.clear();  // shared by the closures of all stacks: each (position, below) expands once
  seen_guard_ = 0;
  for (const uint64_t packed : from) {
    const Config c = unpack(packed);
    OG_ASSIGN_OR_RETURN(const int32_t guard, advance_guard(c.guard, byte));
    if (guard == kViolated) continue;
    if (c.lex >= 0) {
      OG_RETURN_IF_ERROR(step_lexeme(c, guard, byte, configs, accepting));
      continue;
    }
    const Node n = nodes_[static_cast<size_t>(c.node)];
    const int32_t cls = grammar_->code[static_cast<size_t>(n.position)];
    if (!grammar_->classes[static_cast<size_t>(cls)].test(byte)) continue;
    OG_RETURN_IF_ERROR(close(n.position + 1, n.below, guard, configs, accepting));
  }
  OG_ASSIGN_OR_RETURN(const int32_t next, intern(std::move(configs), accepting));
  Row& row = *transitions_[static_cast<size_t>(state)];
  for (const uint8_t same : grammar_->kind_bytes[grammar_->byte_kind[byte]]) row[same] = next;
  return next;
}

}  // namespace onnx_genai::constraints
