#include "constraints/automaton.h"

#include <algorithm>

#include "constraints/utf8.h"

namespace onnx_genai::constraints {

namespace {
constexpr uint8_t kE9[] = {0xC3, 0xA9};  // a character past ASCII (é): any would do
}  // namespace

template <typename T>
size_t Automaton::VectorHash::operator()(const std::vector<T>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (const T x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), chunks_(new std::atomic<Chunk*>[kMaxStates / kRowsPerChunk]()) {
  has_lazy_ = std::any_of(grammar_->lexeme_modes.begin(), grammar_->lexeme_modes.end(), [](const LexemeMode& m) { return m.lazy; });
}
Automaton::~Automaton() = default;

Result<int32_t> Automaton::node(int32_t position, int32_t below) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) | static_cast<uint32_t>(below);
  if (const int32_t* id = node_ids_.find(key)) return *id;
  if (nodes_.size() >= kMaxNodes) {
    return OG_ERROR("grammar: the parser needs more than ", kMaxNodes, " stack frames (nesting too deep)");
  }
  const auto id = static_cast<int32_t>(nodes_.size());
  node_ids_.try_emplace(key, id);
  nodes_.push_back(Node{position, below});
  return id;
}

Automaton& Automaton::lexer() {
  if (!lexer_) lexer_ = std::make_unique<Automaton>(grammar_);
  return *lexer_;
}

Status Automaton::close(int32_t position, int32_t below, int32_t guard, std::vector<uint64_t>& out, bool& accepting) {
  const std::vector<int32_t>& code = grammar_->code;
  std::vector<std::pair<int32_t, int32_t>>& work = work_;
  if (guard != seen_guard_) {  // what was expanded under another guard gave other configurations
    start_closures();
    seen_guard_ = guard;
  }
  work.assign(1, {position, below});
  while (!work.empty()) {
    auto [pos, stack] = work.back();
    work.pop_back();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(stack);
    const auto [expanded, first] = seen_.try_emplace(key, seen_epoch_);
    if (!first && *expanded == seen_epoch_) continue;
    *expanded = seen_epoch_;
    const int32_t c = code[static_cast<size_t>(pos)];
    if (c == Grammar::kEnd) {
      if (stack < 0) {
        accepting = true;
      } else {
        work.emplace_back(nodes_[static_cast<size_t>(stack)].position, nodes_[static_cast<size_t>(stack)].below);
      }
    } else if (Grammar::is_lexeme(c)) {
      OG_ASSIGN_OR_RETURN(const int32_t first, lexer().start_at(grammar_->lexeme_starts[static_cast<size_t>(c - Grammar::kLexemeBase)]));
      OG_ASSIGN_OR_RETURN(const int32_t id, node(pos, stack));
      if (first != kDead) out.push_back(pack(id, first, guard));
    } else if (c >= 0) {  // a byte class or a token
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
  states_.push_back(State{std::move(configs)});
  if (static_cast<size_t>(id) % kRowsPerChunk == 0) {
    auto chunk = std::make_unique<Chunk>();
    for (Row& row : chunk->rows) {
      for (std::atomic<int32_t>& entry : row) entry.store(kUnknown, std::memory_order_relaxed);
    }
    // Released: a reader that finds the chunk finds its rows filled.
    chunks_[static_cast<size_t>(id) / kRowsPerChunk].store(chunk.get(), std::memory_order_release);
    owned_chunks_.push_back(std::move(chunk));
  }
  owned_chunks_.back()->accepting[static_cast<size_t>(id) % kRowsPerChunk] = accepting;
  mark_dead_bytes(id);
  return id;
}

// Most bytes lead nowhere from a state (nine in ten successors asked for in a JSON schema's
// mask walks): those no configuration's class takes are dead, written into the row before the
// state is known to any reader, so compute_next runs for the live ones only.
void Automaton::mark_dead_bytes(int32_t state) {
  ByteSet live;
  for (const uint64_t packed : states_[static_cast<size_t>(state)].configs) {
    const Config c = unpack(packed);
    if (c.lex >= 0) {
      if (!lexer_->first_bytes(c.lex, live)) return;
      continue;
    }
    const int32_t code = grammar_->code[static_cast<size_t>(nodes_[static_cast<size_t>(c.node)].position)];
    if (!Grammar::is_token(code)) live |= grammar_->classes[static_cast<size_t>(code)];
  }
  Row& row = row_at(state);
  for (size_t b = 0; b < 256; ++b) {
    if (!live.test(b)) row[b].store(kDead, std::memory_order_relaxed);
  }
}

bool Automaton::first_bytes(int32_t state, ByteSet& bytes) const {
  for (const uint64_t packed : states_[static_cast<size_t>(state)].configs) {
    const Config c = unpack(packed);
    const int32_t code = grammar_->code[static_cast<size_t>(nodes_[static_cast<size_t>(c.node)].position)];
    if (c.lex >= 0 || !is_class(code)) return false;
    bytes |= grammar_->classes[static_cast<size_t>(code)];
  }
  return true;
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

Result<int32_t> Automaton::join_guards(int32_t a, int32_t b) {
  if (a == 0 || a == b) return b;
  if (b == 0) return a;
  std::vector<int32_t> states = guards_[static_cast<size_t>(a)];
  const std::vector<int32_t>& more = guards_[static_cast<size_t>(b)];
  states.insert(states.end(), more.begin(), more.end());
  return intern_guard(std::move(states));
}

Status Automaton::step_lexeme(const Config& c, int32_t guard, uint8_t byte, StepOut& next) {
  OG_ASSIGN_OR_RETURN(const int32_t lex, lexer_->next(c.lex, byte));
  if (lex == kDead) return Status::ok();
  const Node n = nodes_[static_cast<size_t>(c.node)];
  const int32_t k = grammar_->code[static_cast<size_t>(n.position)] - Grammar::kLexemeBase;
  const LexemeMode& mode = grammar_->lexeme_modes[static_cast<size_t>(k)];
  const bool ends = lexer_->accepting(lex);
  const bool longer = lexer_->extensible(lex) && !(ends && mode.lazy);  // a lazy lexeme ends at its first match
  if (longer) next.going_on.push_back(pack(c.node, lex, guard));
  if (!ends) return Status::ok();
  // The lexeme may end here if what follows never extends it: guarded by its state.
  int32_t after = guard;
  if (longer) {
    std::vector<int32_t> states = guards_[static_cast<size_t>(guard)];
    states.push_back(lex);
    OG_ASSIGN_OR_RETURN(after, intern_guard(std::move(states)));
  }
  if (!mode.reread.empty()) {
    next.rereads.push_back(Reread{c.node, after, &mode.reread});
    return Status::ok();
  }
  return close(n.position + 1, n.below, after, next.begun, next.accepting);
}

// What follows a stop (llguidance's stop=) that must take exactly the stop's bytes first reads
// them again; otherwise it comes after them. Those bytes were read already, so the guards from
// before the lexeme do not see them twice: the walk starts unguarded, and its configurations
// take the lexeme's guard back at the end.
Status Automaton::reread(const Reread& r, int depth, std::vector<uint64_t>& out, bool& accepting) {
  if (depth > kMaxRereadDepth) {
    return OG_ERROR("grammar: stops re-read inside the re-reading of stops, deeper than ", kMaxRereadDepth);
  }
  const Node n = nodes_[static_cast<size_t>(r.node)];
  std::vector<uint64_t> after;
  bool complete = false;
  start_closures();
  OG_RETURN_IF_ERROR(close(n.position + 1, n.below, 0, after, complete));
  OG_RETURN_IF_ERROR(cut_by_lazy(after));
  std::vector<uint64_t> walked = after;
  bool walked_complete = complete, forced = true;
  for (const char c : *r.bytes) {
    const auto byte = static_cast<uint8_t>(c);
    forced = forces(walked, byte);
    if (!forced) break;
    std::vector<uint64_t> next;
    walked_complete = false;
    OG_RETURN_IF_ERROR(step(walked, byte, depth, next, walked_complete));
    walked = std::move(next);
  }
  if (forced) {
    after = std::move(walked);
    complete = walked_complete;
  }
  accepting = accepting || complete;
  for (const uint64_t packed : after) {
    const Config c = unpack(packed);
    OG_ASSIGN_OR_RETURN(const int32_t guard, join_guards(c.guard, r.guard));
    out.push_back(pack(c.node, c.lex, guard));
  }
  return Status::ok();
}

bool Automaton::is_lazy_lexeme(const Config& c) const {
  if (c.lex < 0) return false;
  const int32_t code = grammar_->code[static_cast<size_t>(nodes_[static_cast<size_t>(c.node)].position)];
  return grammar_->lexeme_modes[static_cast<size_t>(code - Grammar::kLexemeBase)].lazy;
}

// llguidance's lexer emits a lazy lexeme the moment it matches, so what began where it began
// (another lexeme, a string's bytes, ignored text, and what follows them) dies at that byte.
// Lazy lexemes begun together do not cut each other (llguidance would keep the first to match).
Status Automaton::cut_by_lazy(std::vector<uint64_t>& begun) {
  if (!has_lazy_) return Status::ok();
  std::vector<int32_t> lazy;
  for (const uint64_t packed : begun) {
    const Config c = unpack(packed);
    if (is_lazy_lexeme(c)) lazy.push_back(c.lex);
  }
  if (lazy.empty()) return Status::ok();
  OG_ASSIGN_OR_RETURN(const int32_t cut, intern_guard(std::move(lazy)));
  for (uint64_t& packed : begun) {
    const Config c = unpack(packed);
    if (is_lazy_lexeme(c)) continue;
    OG_ASSIGN_OR_RETURN(const int32_t guard, join_guards(c.guard, cut));
    packed = pack(c.node, c.lex, guard);
  }
  return Status::ok();
}

bool Automaton::forces(const std::vector<uint64_t>& configs, uint8_t byte) const {
  ByteSet first;
  for (const uint64_t packed : configs) {
    const Config c = unpack(packed);
    if (c.lex >= 0) {
      if (!lexer_->first_bytes(c.lex, first)) return false;
      continue;
    }
    const int32_t code = grammar_->code[static_cast<size_t>(nodes_[static_cast<size_t>(c.node)].position)];
    if (Grammar::is_token(code)) return false;
    first |= grammar_->classes[static_cast<size_t>(code)];
  }
  return first.count() == 1 && first.test(byte);
}

// Whether every way of finishing the character begun (`utf8`, at `state`) leads to `to` through
// live states. Bytes the grammar does not tell apart go alike, so one byte per kind is tried.
Result<bool> Automaton::characters_lead(int32_t to, int32_t state, int8_t utf8) {
  std::vector<bool> tried(grammar_->kind_bytes.size());
  for (int b = 0x80; b <= 0xFF; ++b) {
    const int8_t after = utf8::step(utf8, static_cast<uint8_t>(b));
    const uint8_t kind = grammar_->byte_kind[static_cast<size_t>(b)];
    if (after == utf8::kInvalid || (utf8 != utf8::kBoundary && tried[kind])) continue;
    tried[kind] = true;  // at a boundary each lead byte is tried: its own table row follows
    OG_ASSIGN_OR_RETURN(const int32_t next, this->next(state, static_cast<uint8_t>(b)));
    if (next == kDead || (after == utf8::kBoundary && next != to)) return false;
    if (after == utf8::kBoundary) continue;
    OG_ASSIGN_OR_RETURN(const bool kept, characters_lead(to, next, after));
    if (!kept) return false;
  }
  return true;
}

// A string's inside as the grammar spells it (char_class_rule): the configurations are the
// starts of one rule's alternatives, entered with one return, beside others (a closing quote).
// When that rule takes every character past ASCII whole (checked once per rule) and none of the
// others takes such a byte, every such character ends the rule and returns to the same place, as
// does every ASCII byte that only the rule's one-class alternatives take: the state after é,
// computed as the return from the rule. Those ASCII bytes (`stays`) get that successor in the
// table at once. This spares following every byte kind and lead byte from each state of the
// inside (tens of new states per character counted: a maxLength string's inside in each
// context). kUnknown where the state is not so.
Result<int32_t> Automaton::whole_character_step(int32_t state, ByteSet& stays) {
  int32_t rule = -1, below = -1;
  ByteSet single, other;
  for (const uint64_t packed : states_[static_cast<size_t>(state)].configs) {
    const Config c = unpack(packed);
    const Node n = nodes_[static_cast<size_t>(c.node)];
    const int32_t cls = grammar_->code[static_cast<size_t>(n.position)];
    if (c.lex >= 0 || c.guard != 0 || !is_class(cls)) return kUnknown;
    const ByteSet& bytes = grammar_->classes[static_cast<size_t>(cls)];
    const int32_t of = alternative_rule(n.position);
    const bool past_ascii = (bytes >> 128).any();
    if (past_ascii && (of < 0 || (rule >= 0 && (of != rule || n.below != below)))) return kUnknown;
    if (past_ascii) {
      rule = of;
      below = n.below;
    }
    const bool one_class = of >= 0 && grammar_->code[static_cast<size_t>(n.position) + 1] == Grammar::kEnd;
    (one_class ? single : other) |= bytes;
  }
  if (rule < 0) return kUnknown;
  // Only the rule's own one-class alternatives may take the bytes that stay, entered as the
  // rule's with its return (a one-class alternative of another rule would end elsewhere).
  for (const uint64_t packed : states_[static_cast<size_t>(state)].configs) {
    const Node n = nodes_[static_cast<size_t>(unpack(packed).node)];
    if (alternative_rule(n.position) != rule || n.below != below) {
      other |= grammar_->classes[static_cast<size_t>(grammar_->code[static_cast<size_t>(n.position)])];
    }
  }
  OG_ASSIGN_OR_RETURN(const bool whole, takes_every_character(rule));
  if (!whole) return kUnknown;
  // The rule ended: the parse returns to `below` (compute_next's closure after a last byte),
  // without the state halfway through a character that é's bytes would make.
  std::vector<uint64_t> configs;
  bool accepting = false;
  start_closures();
  if (below < 0) {
    accepting = true;
  } else {
    const Node ret = nodes_[static_cast<size_t>(below)];
    OG_RETURN_IF_ERROR(close(ret.position, ret.below, 0, configs, accepting));
    OG_RETURN_IF_ERROR(cut_by_lazy(configs));  // as compute_next's closure after the last byte
  }
  OG_ASSIGN_OR_RETURN(const int32_t to, intern(std::move(configs), accepting));
  if (to == kDead) return kUnknown;
  stays.reset();
  Row& row = row_at(state);
  for (size_t b = 0; b < 0x80; ++b) {
    if (!single.test(b) || other.test(b)) continue;
    stays.set(b);
    row[b].store(to, std::memory_order_release);
  }
  return to;
}

int32_t Automaton::alternative_rule(int32_t position) {
  if (alternative_rules_.empty()) {
    alternative_rules_.assign(grammar_->code.size(), -1);
    for (size_t r = 0; r < grammar_->alternatives.size(); ++r) {
      for (const int32_t start : grammar_->alternatives[r]) alternative_rules_[static_cast<size_t>(start)] = static_cast<int32_t>(r);
    }
  }
  return alternative_rules_[static_cast<size_t>(position)];
}

Result<bool> Automaton::takes_every_character(int32_t rule) {
  if (auto it = whole_character_rules_.find(rule); it != whole_character_rules_.end()) return it->second;
  // Alternatives of byte classes only, started together at the bottom of a stack: every
  // character past ASCII must end the rule, and nothing else be left.
  bool whole = true;
  std::vector<uint64_t> configs;
  for (const int32_t start : grammar_->alternatives[static_cast<size_t>(rule)]) {
    whole = grammar_->code[static_cast<size_t>(start)] != Grammar::kEnd;  // an empty one ends at once
    for (int32_t p = start; whole && grammar_->code[static_cast<size_t>(p)] != Grammar::kEnd; ++p) {
      whole = is_class(grammar_->code[static_cast<size_t>(p)]);
    }
    if (!whole) break;
    OG_ASSIGN_OR_RETURN(const int32_t id, node(start, -1));
    configs.push_back(pack(id, -1, 0));
  }
  if (whole) {
    std::sort(configs.begin(), configs.end());
    configs.erase(std::unique(configs.begin(), configs.end()), configs.end());
    OG_ASSIGN_OR_RETURN(const int32_t alone, intern(std::move(configs), false));
    OG_ASSIGN_OR_RETURN(const int32_t half, next(alone, kE9[0]));
    OG_ASSIGN_OR_RETURN(const int32_t ended, next(half, kE9[1]));
    // The rule ended and nothing of it is left: the bottom of the stack accepts, no configuration.
    whole = ended != kDead && accepting(ended) && !extensible(ended);
    if (whole) {
      OG_ASSIGN_OR_RETURN(whole, characters_lead(ended, alone, utf8::kBoundary));
    }
  }
  whole_character_rules_.emplace(rule, whole);
  return whole;
}

// One step of a string's inside: the state every character allowed leads to from `state`, and
// `run` filled with the ASCII bytes that lead there and whether every UTF-8 character beyond
// ASCII does too (else none may come). kDead when nothing of `run` may come any more (the end
// of a maxLength); kUnknown when characters go different ways. At the first step (`first`) the
// ASCII bytes are those of the commonest successor; later ones must keep `run` as it was.
Result<int32_t> Automaton::run_step(int32_t state, bool first, StringRun& run) {
  ByteSet whole_stays;
  OG_ASSIGN_OR_RETURN(const int32_t whole_to, whole_character_step(state, whole_stays));
  if (whole_to != kUnknown) {
    if (!first && (whole_stays != run.stays || !run.unicode)) return kUnknown;
    run.stays = whole_stays;
    run.unicode = true;
    return whole_to;
  }
  // A lead byte that may come makes every character a must; one that may not, none.
  int32_t to = kDead;
  bool unicode = false, refused = false;
  for (int b = 0xC2; b <= 0xF4; ++b) {
    OG_ASSIGN_OR_RETURN(const int32_t half, next(state, static_cast<uint8_t>(b)));
    (half == kDead ? refused : unicode) = true;
  }
  if (unicode && refused) return kUnknown;
  if (unicode) {
    OG_ASSIGN_OR_RETURN(const int32_t half, next(state, kE9[0]));
    OG_ASSIGN_OR_RETURN(to, next(half, kE9[1]));
    if (to == kDead) return kUnknown;
    OG_ASSIGN_OR_RETURN(const bool all, characters_lead(to, state, utf8::kBoundary));
    if (!all) return kUnknown;
  }
  // Successors of the ASCII kinds, and how many bytes go to each.
  std::vector<std::pair<int32_t, int32_t>> ascii;  // (successor, kind)
  std::unordered_map<int32_t, int32_t> bytes_to;
  for (size_t k = 0; k < grammar_->kind_bytes.size(); ++k) {
    const std::vector<uint8_t>& kind = grammar_->kind_bytes[k];
    if (kind[0] >= 0x80) continue;
    OG_ASSIGN_OR_RETURN(const int32_t next, this->next(state, kind[0]));
    ascii.emplace_back(next, static_cast<int32_t>(k));
    if (next != kDead) bytes_to[next] += static_cast<int32_t>(std::count_if(kind.begin(), kind.end(), [](uint8_t b) { return b < 0x80; }));
  }
  if (!unicode && !first) {  // the way the run's bytes went so far
    for (const auto& [next, k] : ascii) {
      const std::vector<uint8_t>& kind = grammar_->kind_bytes[static_cast<size_t>(k)];
      if (std::none_of(kind.begin(), kind.end(), [&](uint8_t b) { return b < 0x80 && run.stays.test(b); })) continue;
      to = next;
      break;
    }
  } else if (!unicode) {  // the way most ASCII bytes go
    for (const auto& [next, count] : bytes_to) {
      if (to == kDead || count > bytes_to[to] || (count == bytes_to[to] && next < to)) to = next;
    }
  }
  ByteSet stays;
  bool live = false;  // a byte of the run's may still come
  for (const auto& [next, k] : ascii) {
    for (const uint8_t b : grammar_->kind_bytes[static_cast<size_t>(k)]) {
      if (b >= 0x80) continue;
      if (next == to && to != kDead) stays.set(b);
      live = live || (next != kDead && run.stays.test(b));
    }
  }
  if (!first && to == kDead && !unicode) return live ? kUnknown : kDead;
  if (to == kDead || (!first && (stays != run.stays || unicode != run.unicode))) return kUnknown;
  if (!unicode && stays.count() < kMinRunBytes) return kUnknown;
  run.stays = stays;
  run.unicode = unicode;
  return to;
}

int32_t Automaton::StringRun::after(int32_t c) const {
  const auto size = static_cast<int32_t>(chain->size());
  int32_t at = offset + c;
  if (at >= size && loop < 0) return kDead;
  if (at >= size) at = loop + (at - loop) % (size - loop);
  return (*chain)[static_cast<size_t>(at)];
}

Result<const Automaton::StringRun*> Automaton::string_run(int32_t state, int32_t enough) {
  if (auto it = string_runs_.find(state); it != string_runs_.end()) return it->second.get();
  // Follow the run: every step must send all characters and the same ASCII bytes one way. It
  // ends where nothing more may come (a maxLength), or returns to a state seen (unbounded).
  std::vector<int32_t> chain{state};
  StringRun found{ByteSet(), false, -1, nullptr};
  bool run = true;
  while (run && static_cast<int32_t>(chain.size()) <= enough) {
    OG_ASSIGN_OR_RETURN(const int32_t to, run_step(chain.back(), chain.size() == 1, found));
    if (to == kDead && chain.size() > 1) {
      found.chars = static_cast<int32_t>(chain.size()) - 1;
      break;
    }
    run = to != kUnknown && to != kDead;
    if (const auto seen = std::find(chain.begin(), chain.end(), to); run && seen != chain.end()) {
      found.loop = static_cast<int32_t>(seen - chain.begin());
      break;
    }
    if (run) chain.push_back(to);
  }
  if (!run) return string_runs_.emplace(state, nullptr).first->second.get();
  // The run's later states are runs too, unless it was cut at `enough` (their end is unknown).
  const bool cut = static_cast<int32_t>(chain.size()) > enough;
  found.chain = std::make_shared<const std::vector<int32_t>>(std::move(chain));
  for (size_t j = 0; j < (cut ? 1 : found.chain->size()); ++j) {
    StringRun later = found;
    if (found.chars >= 0) later.chars -= static_cast<int32_t>(j);
    later.offset = static_cast<int32_t>(j);
    string_runs_.try_emplace((*found.chain)[j], std::make_unique<StringRun>(later));
  }
  return string_runs_.at(state).get();
}

Result<int32_t> Automaton::start_at(int32_t position) {
  if (auto it = starts_.find(position); it != starts_.end()) return it->second;
  std::vector<uint64_t> configs;
  bool accepting = false;
  start_closures();
  OG_RETURN_IF_ERROR(close(position, -1, 0, configs, accepting));
  OG_RETURN_IF_ERROR(cut_by_lazy(configs));
  OG_ASSIGN_OR_RETURN(const int32_t start, intern(std::move(configs), accepting));
  starts_.emplace(position, start);
  return start;
}

Result<int32_t> Automaton::compute_next(int32_t state, uint8_t byte) {
  std::vector<uint64_t> configs;
  bool accepting = false;
  // Copied: close() may add states' nodes, and intern() grows states_.
  const std::vector<uint64_t> from = states_[static_cast<size_t>(state)].configs;
  OG_RETURN_IF_ERROR(step(from, byte, 0, configs, accepting));
  OG_ASSIGN_OR_RETURN(const int32_t next, intern(std::move(configs), accepting));
  // Released: a reader that sees `next` sees its row too.
  Row& row = row_at(state);
  for (const uint8_t same : grammar_->kind_bytes[grammar_->byte_kind[byte]]) row[same].store(next, std::memory_order_release);
  return next;
}

Status Automaton::step(const std::vector<uint64_t>& from, uint8_t byte, int depth, std::vector<uint64_t>& out, bool& accepting) {
  StepOut next;
  start_closures();  // shared by the closures of all stacks: each (position, below) expands once
  for (const uint64_t packed : from) {
    const Config c = unpack(packed);
    OG_ASSIGN_OR_RETURN(const int32_t guard, advance_guard(c.guard, byte));
    if (guard == kViolated) continue;
    if (c.lex >= 0) {
      OG_RETURN_IF_ERROR(step_lexeme(c, guard, byte, next));
      continue;
    }
    const Node n = nodes_[static_cast<size_t>(c.node)];
    const int32_t cls = grammar_->code[static_cast<size_t>(n.position)];
    if (Grammar::is_token(cls) || !grammar_->classes[static_cast<size_t>(cls)].test(byte)) continue;
    OG_RETURN_IF_ERROR(close(n.position + 1, n.below, guard, next.begun, next.accepting));
  }
  OG_RETURN_IF_ERROR(cut_by_lazy(next.begun));
  if (out.empty()) {
    out.swap(next.begun);
  } else {
    out.insert(out.end(), next.begun.begin(), next.begun.end());
  }
  out.insert(out.end(), next.going_on.begin(), next.going_on.end());
  accepting = accepting || next.accepting;
  for (const Reread& r : next.rereads) OG_RETURN_IF_ERROR(reread(r, depth + 1, out, accepting));
  return Status::ok();
}

Result<bool> Automaton::accepts(std::string_view text) {
  OG_ASSIGN_OR_RETURN(int32_t state, start());
  for (const char c : text) {
    OG_ASSIGN_OR_RETURN(state, next(state, static_cast<uint8_t>(c)));
  }
  return accepting(state);
}

Result<int32_t> Automaton::next_token(int32_t state, int32_t id) {
  if (state == kDead) return kDead;
  const uint64_t key = static_cast<uint64_t>(state) << 32 | static_cast<uint32_t>(id);
  if (auto it = token_transitions_.find(key); it != token_transitions_.end()) return it->second;
  std::vector<uint64_t> configs;
  bool accepting = false;
  const std::vector<uint64_t> from = states_[static_cast<size_t>(state)].configs;  // intern() grows states_
  start_closures();
  for (const uint64_t packed : from) {
    const Config c = unpack(packed);
    if (c.lex >= 0) continue;  // a token is no part of a lexeme's text
    const Node n = nodes_[static_cast<size_t>(c.node)];
    const int32_t code = grammar_->code[static_cast<size_t>(n.position)];
    if (!Grammar::is_token(code) || !grammar_->tokens[static_cast<size_t>(code - Grammar::kTokenBase)].contains(id)) continue;
    // No byte follows a lexeme that the token ends, so its longest match is settled: no guard.
    OG_RETURN_IF_ERROR(close(n.position + 1, n.below, 0, configs, accepting));
  }
  OG_RETURN_IF_ERROR(cut_by_lazy(configs));
  OG_ASSIGN_OR_RETURN(const int32_t next, intern(std::move(configs), accepting));
  token_transitions_.emplace(key, next);
  return next;
}

std::vector<int32_t> Automaton::token_symbols_at(int32_t state) const {
  std::vector<int32_t> symbols;
  if (state == kDead || grammar_->tokens.empty()) return symbols;
  for (const uint64_t packed : states_[static_cast<size_t>(state)].configs) {
    const Config c = unpack(packed);
    if (c.lex >= 0) continue;
    const int32_t code = grammar_->code[static_cast<size_t>(nodes_[static_cast<size_t>(c.node)].position)];
    if (Grammar::is_token(code)) symbols.push_back(code - Grammar::kTokenBase);
  }
  return symbols;
}

Result<int32_t> Automaton::merge(int32_t a, int32_t b) {
  if (a == kDead || a == b) return b;
  if (b == kDead) return a;
  std::vector<uint64_t> configs = states_[static_cast<size_t>(a)].configs;
  const std::vector<uint64_t>& more = states_[static_cast<size_t>(b)].configs;
  configs.insert(configs.end(), more.begin(), more.end());
  return intern(std::move(configs), accepting(a) || accepting(b));
}

}  // namespace onnx_genai::constraints
