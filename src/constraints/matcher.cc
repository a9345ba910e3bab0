// ConstraintVocabulary, CompiledConstraint and ConstraintMatcher (include/onnx_genai/constraints.h).
#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "constraints/compiled_state.h"
#include "constraints/json_schema.h"
#include "constraints/lark_grammar.h"
#include "constraints/regex_compiler.h"
#include "onnx_genai/constraints.h"

namespace onnx_genai {

using constraints::Automaton;
using constraints::ByteSet;
using constraints::CompiledState;
using constraints::Grammar;
using constraints::GrammarToken;
using constraints::TokenTrie;

namespace constraints {

namespace {

std::bitset<128> ascii(const ByteSet& bytes) {
  std::bitset<128> out;
  for (size_t b = 0; b < 128; ++b) out[b] = bytes.test(b);
  return out;
}

// A successor no thread has computed yet, met by a mask's walk at `resume` (a trie node, or a
// group of leaving tokens). The walk leaves it and goes on, then computes all it met under one
// hold of the constraint's lock and resumes there: threads computing new masks at once then
// wait for each other once a round, not once a successor (with a lock per successor, 8 threads
// took longer over a batch's 64 masks than one thread did).
struct Unknown {
  int32_t state;
  uint8_t byte;
  size_t resume;
};

Status compute_unknowns(CompiledState& shared, std::span<const Unknown> unknowns, std::vector<int32_t>& next) {
  next.resize(unknowns.size());
  if (unknowns.empty()) return Status::ok();
  std::lock_guard lock(shared.mutex);
  for (size_t k = 0; k < unknowns.size(); ++k) {
    OG_ASSIGN_OR_RETURN(next[k], shared.automaton.next(unknowns[k].state, unknowns[k].byte));
  }
  return Status::ok();
}

void add_token(int32_t id, std::vector<uint64_t>& mask) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }

// Sets or clears the bits of ids [lo, hi] (a token set: <[*]> is the whole vocabulary).
void set_ids(int32_t lo, int32_t hi, bool on, std::vector<uint64_t>& mask) {
  for (auto id = static_cast<size_t>(lo); id <= static_cast<size_t>(hi);) {
    const size_t bit = id & 63, last = std::min<size_t>(63, bit + static_cast<size_t>(hi) - id);
    const uint64_t bits = (last == 63 ? ~uint64_t{0} : (uint64_t{1} << (last + 1)) - 1) & ~((uint64_t{1} << bit) - 1);
    uint64_t& word = mask[id >> 6];
    word = on ? word | bits : word & ~bits;
    id += last - bit + 1;
  }
}

// Adds to `mask` the tokens of `trie` whose bytes the automaton accepts, over known successors,
// skipping the subtrees `skip` marks (a bit per node; those tokens are decided already).
class TrieWalk {
 public:
  TrieWalk(const Automaton& automaton, const TokenTrie& trie, const std::vector<uint64_t>* skip, std::vector<uint64_t>& mask)
      : automaton_(automaton), trie_(trie), skip_(skip), mask_(mask), states_(trie.max_depth() + 1), rows_(trie.max_depth() + 1) {}

  // Nodes [begin, end), below a node of depth `depth` reached in `state`; each node whose
  // successor is unknown goes to `unknown` and its subtree waits.
  void run(size_t begin, size_t end, size_t depth, int32_t state, std::vector<Unknown>& unknown) {
    const std::vector<TokenTrie::Node>& nodes = trie_.nodes();
    // states_[d] is the state after the first d bytes of the current trie path, rows_[d] its
    // successor row (one load per trie node).
    states_[depth] = state;
    rows_[depth] = &automaton_.row(state);
    for (size_t i = begin; i < end;) {
      const TokenTrie::Node& n = nodes[i];
      if (skip_ != nullptr && ((*skip_)[i >> 6] >> (i & 63)) & 1) {
        i = static_cast<size_t>(n.subtree_end);
        continue;
      }
      const int32_t next = (*rows_[n.depth - 1u])[n.byte].load(std::memory_order_acquire);
      if (next == Automaton::kUnknown) unknown.push_back(Unknown{states_[n.depth - 1u], n.byte, i});
      if (next == Automaton::kUnknown || next == Automaton::kDead) {
        i = static_cast<size_t>(n.subtree_end);
        continue;
      }
      states_[n.depth] = next;
      rows_[n.depth] = &automaton_.row(next);
      add_tokens(n);
      ++i;
    }
  }
  // Node `at`, whose successor turned out to be `state`, and its subtree.
  void resume(size_t at, int32_t state, std::vector<Unknown>& unknown) {
    if (state == Automaton::kDead) return;
    const TokenTrie::Node& n = trie_.nodes()[at];
    add_tokens(n);
    run(at + 1, static_cast<size_t>(n.subtree_end), n.depth, state, unknown);
  }

 private:
  void add_tokens(const TokenTrie::Node& n) {
    for (int32_t k = n.first_token; k < n.first_token + n.token_count; ++k) add_token(trie_.node_tokens()[static_cast<size_t>(k)], mask_);
  }
  const Automaton& automaton_;
  const TokenTrie& trie_;
  const std::vector<uint64_t>* skip_;
  std::vector<uint64_t>& mask_;
  std::vector<int32_t> states_;
  std::vector<const Automaton::Row*> rows_;
};

Status walk(CompiledState& shared, const TokenTrie& trie, int32_t state, const std::vector<uint64_t>* skip,
            std::vector<uint64_t>& mask) {
  TrieWalk walk(shared.automaton, trie, skip, mask);
  std::vector<Unknown> unknown, met;
  std::vector<int32_t> next;
  walk.run(0, trie.nodes().size(), 0, state, unknown);
  while (!unknown.empty()) {
    met.swap(unknown);
    unknown.clear();
    OG_RETURN_IF_ERROR(compute_unknowns(shared, met, next));
    for (size_t k = 0; k < met.size(); ++k) walk.resume(met[k].resume, next[k], unknown);
  }
  return Status::ok();
}

// A token's bytes after its first one past a string run, read from the state that first byte
// leads to; `state` ends kDead when the automaton refuses them.
struct Rest {
  int32_t state;
  std::string_view bytes;
  size_t taken = 1;  // bytes read (the first is the exit from the run)
};

// Reads every rest to its end, computing the unknown successors met in rounds.
Status read_rests(CompiledState& shared, std::vector<Rest>& rests) {
  const Automaton& automaton = shared.automaton;
  std::vector<size_t> reading(rests.size());
  for (size_t r = 0; r < rests.size(); ++r) reading[r] = r;
  std::vector<Unknown> unknown;
  std::vector<int32_t> next;
  while (!reading.empty()) {
    unknown.clear();
    for (const size_t r : reading) {
      Rest& rest = rests[r];
      for (; rest.state != Automaton::kDead && rest.taken < rest.bytes.size(); ++rest.taken) {
        const auto byte = static_cast<uint8_t>(rest.bytes[rest.taken]);
        const int32_t after = automaton.known_next(rest.state, byte);
        if (after == Automaton::kUnknown) {
          unknown.push_back(Unknown{rest.state, byte, r});
          break;
        }
        rest.state = after;
      }
    }
    OG_RETURN_IF_ERROR(compute_unknowns(shared, unknown, next));
    reading.clear();
    for (size_t k = 0; k < unknown.size(); ++k) {
      Rest& rest = rests[unknown[k].resume];
      rest.state = next[k];
      ++rest.taken;
      reading.push_back(unknown[k].resume);
    }
  }
  return Status::ok();
}

// Adds to `mask` the tokens that leave `run` (TokenTrie::Leaving) and go on: each rest is read
// from the run's state at its cut, once for neighbours with the same rest and the same state
// after its first byte (past a string's minimum length, a closing quote leads one way).
Status add_leaving(CompiledState& shared, const TokenTrie& trie, const Automaton::StringRun& run,
                   const std::vector<TokenTrie::Leaving>& leaving, std::vector<uint64_t>& mask) {
  // The state after each token's first byte past the run (its exit).
  std::vector<int32_t> exits(leaving.size(), Automaton::kDead);
  std::vector<Unknown> unknown;
  std::vector<int32_t> next;
  for (size_t k = 0; k < leaving.size(); ++k) {
    const TokenTrie::Leaving& t = leaving[k];
    if (run.chars >= 0 && t.chars > run.chars) continue;
    const int32_t from = run.after(t.chars);
    exits[k] = shared.automaton.known_next(from, t.exit);
    if (exits[k] == Automaton::kUnknown) unknown.push_back(Unknown{from, t.exit, k});
  }
  OG_RETURN_IF_ERROR(compute_unknowns(shared, unknown, next));
  for (size_t k = 0; k < unknown.size(); ++k) exits[unknown[k].resume] = next[k];
  std::vector<Rest> rests;
  std::vector<int32_t> rest_of(leaving.size(), -1);
  int32_t last_rest = -1, last_exit = Automaton::kDead;
  for (size_t k = 0; k < leaving.size(); ++k) {
    if (exits[k] == Automaton::kDead) continue;
    if (leaving[k].rest != last_rest || exits[k] != last_exit) {
      rests.push_back(Rest{exits[k], std::string_view(trie.bytes(leaving[k].id)).substr(leaving[k].prefix)});
      last_rest = leaving[k].rest;
      last_exit = exits[k];
    }
    rest_of[k] = static_cast<int32_t>(rests.size()) - 1;
  }
  OG_RETURN_IF_ERROR(read_rests(shared, rests));
  for (size_t k = 0; k < leaving.size(); ++k) {
    if (rest_of[k] >= 0 && rests[static_cast<size_t>(rest_of[k])].state != Automaton::kDead) add_token(leaving[k].id, mask);
  }
  return Status::ok();
}

}  // namespace

Status walk_token_trie(CompiledState& shared, const TokenTrie& trie, int32_t state, std::vector<uint64_t>& mask) {
  mask.assign((static_cast<size_t>(trie.vocab_size()) + 63) / 64, 0);
  if (state == Automaton::kDead) return Status::ok();
  // Inside a string: the tokens that stay inside come from the vocabulary's table, and only the
  // rests of those that leave it (at a quote, an escape, a control byte, a character refused or
  // broken) are walked, or where those are many, the subtrees holding them.
  // A state's run, once computed, is kept and never changed: read on without the lock.
  const Automaton::StringRun* run = nullptr;
  std::vector<int32_t> named_here;
  {
    std::lock_guard lock(shared.mutex);
    OG_ASSIGN_OR_RETURN(run, shared.automaton.string_run(state, static_cast<int32_t>(trie.max_depth())));
    named_here = shared.automaton.token_symbols_at(state);
  }
  const TokenTrie::InsideView inside = run != nullptr ? trie.inside(ascii(run->stays), run->unicode, run->chars) : TokenTrie::InsideView{};
  if (inside.mask != nullptr) mask = *inside.mask;
  if (inside.leaving != nullptr) {
    OG_RETURN_IF_ERROR(add_leaving(shared, trie, *run, *inside.leaving, mask));
  } else {
    OG_RETURN_IF_ERROR(walk(shared, trie, state, inside.whole, mask));
  }
  // The tokens the grammar names alone are allowed by id where it takes them, never by their
  // bytes (an added token such as Qwen's <tool_call> has bytes). A set's tokens are allowed by id
  // where it is taken, and the ordinary ones among them by their bytes too, as the walk found.
  const std::vector<GrammarToken>& tokens = shared.automaton.grammar().tokens;  // fixed at compile
  for (const GrammarToken& t : tokens) {
    if (!t.set) set_ids(t.id, t.id, false, mask);
  }
  for (const int32_t k : named_here) {
    const GrammarToken& t = tokens[static_cast<size_t>(k)];
    if (!t.set) set_ids(t.id, t.id, true, mask);
    for (const auto& [lo, hi] : t.ranges) set_ids(lo, hi, true, mask);
  }
  return Status::ok();
}

// A second chance: the masks asked for again since the cache was last full stay, unless they
// are most of it (then the scans would come too often). Entries in use live on with their holders.
void CompiledState::drop_unasked_masks() {
  std::erase_if(masks, [](const auto& entry) { return !entry.second->asked; });
  if (masks.size() > max_cached_masks * 3 / 4) masks.clear();
  for (auto& [state, entry] : masks) entry->asked = false;
}

Result<std::shared_ptr<const CompiledState::Mask>> CompiledState::mask(int32_t state, const TokenTrie& trie) {
  std::shared_ptr<Mask> entry;
  {
    std::lock_guard lock(masks_mutex);
    auto it = masks.find(state);
    if (it == masks.end()) {
      if (masks.size() >= max_cached_masks) drop_unasked_masks();
      it = masks.emplace(state, std::make_shared<Mask>()).first;
    } else {
      it->second->asked = true;
    }
    entry = it->second;
  }
  std::call_once(entry->once, [&] { entry->status = walk_token_trie(*this, trie, state, entry->words); });
  if (!entry->status.is_ok()) return entry->status;
  return std::shared_ptr<const Mask>(std::move(entry));
}

}  // namespace constraints

namespace {

// The string insides met most often, their tables built with the vocabulary so that no request
// waits for them: a JSON string's raw ASCII (not '"', '\\' or a control character), and every
// character but a newline (a regex's '.', a line of text).
std::vector<std::bitset<128>> common_string_bytes() {
  std::bitset<128> json, line;
  for (size_t b = 0; b < 128; ++b) {
    json[b] = b >= 0x20 && b != '"' && b != '\\';
    line[b] = b != '\n';
  }
  return {json, line};
}

// A set's ids against the vocabulary: each must be in it, and a negation becomes the ids it
// leaves (<[*]>: all of them, special and stop tokens included, as llguidance has it).
Status bind_set(GrammarToken& t, int32_t vocab_size) {
  for (const auto& [lo, hi] : t.ranges) {
    if (hi >= vocab_size) {
      return OG_ERROR(t.where, ": token id ", hi, " in ", t.text, " is outside the vocabulary (", vocab_size, " tokens)");
    }
  }
  if (t.negated) {
    std::vector<GrammarToken::IdRange> left;
    int32_t next = 0;
    for (const auto& [lo, hi] : t.ranges) {  // sorted and disjoint
      if (lo > next) left.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next < vocab_size) left.emplace_back(next, vocab_size - 1);
    t.ranges = std::move(left);
    t.negated = false;
  }
  if (t.ranges.empty()) return OG_ERROR(t.where, ": token set ", t.text, " excludes every token of the vocabulary (", vocab_size, ")");
  return Status::ok();
}

// Gives each token the grammar names its id: here the grammar first meets a vocabulary.
Status bind_tokens(constraints::Grammar& grammar, const ConstraintVocabulary& vocabulary) {
  for (GrammarToken& t : grammar.tokens) {
    if (t.set) {
      OG_RETURN_IF_ERROR(bind_set(t, vocabulary.vocab_size()));
    } else if (t.id < 0) {
      const std::optional<int32_t> id = vocabulary.token_named(t.text);
      if (!id) return OG_ERROR(t.where, ": token ", t.text, " is not in the vocabulary");
      t.id = *id;
    } else if (t.id >= vocabulary.vocab_size()) {
      return OG_ERROR(t.where, ": token ", t.text, " is outside the vocabulary (", vocabulary.vocab_size(), " tokens)");
    }
  }
  return Status::ok();
}

// The state after token `id` taken by id (kDead where the grammar takes no token holding it).
// An ordinary token of a set (`in_set`) may spell text there too: both readings stay alive, as
// the mask allows it for either, so that what may follow is what either allows.
Result<int32_t> take_named(CompiledState& shared, const TokenTrie& trie, int32_t state, int32_t id, bool in_set) {
  std::lock_guard lock(shared.mutex);
  Automaton& automaton = shared.automaton;
  OG_ASSIGN_OR_RETURN(const int32_t by_id, automaton.next_token(state, id));
  const std::string& bytes = trie.bytes(id);
  if (by_id == Automaton::kDead || !in_set || bytes.empty()) return by_id;
  int32_t by_bytes = state;
  for (size_t i = 0; i < bytes.size() && by_bytes != Automaton::kDead; ++i) {
    OG_ASSIGN_OR_RETURN(by_bytes, automaton.next(by_bytes, static_cast<uint8_t>(bytes[i])));
  }
  return automaton.merge(by_id, by_bytes);
}

}  // namespace

Result<std::shared_ptr<const ConstraintVocabulary>> ConstraintVocabulary::create(const Tokenizer& tokenizer,
                                                                                   int32_t vocab_size,
                                                                                   std::vector<int32_t> stop_ids) {
  OG_ASSIGN_OR_RETURN(TokenTrie trie, TokenTrie::build(tokenizer, vocab_size, std::move(stop_ids)));
  std::shared_ptr<ConstraintVocabulary> vocabulary(new ConstraintVocabulary());
  vocabulary->trie_ = std::make_unique<TokenTrie>(std::move(trie));
  for (int32_t id = 0; id < std::min(vocab_size, tokenizer.vocab_size()); ++id) {
    const std::string_view text = tokenizer.id_to_token(id);
    if (text.size() > 2 && text.front() == '<' && text.back() == '>') vocabulary->angle_tokens_.emplace(text, id);
  }
  for (const std::bitset<128>& bytes : common_string_bytes()) (void)vocabulary->trie_->inside(bytes, true, -1);
  return std::shared_ptr<const ConstraintVocabulary>(std::move(vocabulary));
}

ConstraintVocabulary::~ConstraintVocabulary() = default;
int32_t ConstraintVocabulary::vocab_size() const { return trie_->vocab_size(); }
const std::string& ConstraintVocabulary::token_bytes(int32_t id) const { return trie_->bytes(id); }
size_t ConstraintVocabulary::trie_nodes() const { return trie_->nodes().size(); }
std::optional<int32_t> ConstraintVocabulary::token_named(std::string_view text) const {
  const auto it = angle_tokens_.find(text);
  return it == angle_tokens_.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

Result<std::shared_ptr<CompiledConstraint>> CompiledConstraint::compile(
    const ConstraintSpec& spec, std::shared_ptr<const ConstraintVocabulary> vocabulary) {
  if (!vocabulary) return OG_ERROR("constraint: no vocabulary");
  Result<constraints::Grammar> grammar = OG_ERROR("constraint: unknown kind");
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      grammar = constraints::compile_json_schema(spec.text, {.compact = spec.compact_json});
      break;
    case ConstraintKind::kJsonObject:
      grammar = constraints::any_json_object_grammar(spec.compact_json);
      break;
    case ConstraintKind::kRegex:
      grammar = constraints::compile_regex(spec.text);
      break;
    case ConstraintKind::kLarkGrammar:
      grammar = constraints::compile_lark_grammar(spec.text);
      break;
  }
  if (!grammar) return grammar.status();
  OG_RETURN_IF_ERROR(bind_tokens(*grammar, *vocabulary));
  std::shared_ptr<CompiledConstraint> compiled(new CompiledConstraint());
  compiled->vocabulary_ = std::move(vocabulary);
  compiled->state_ = std::make_unique<CompiledState>(std::make_shared<const constraints::Grammar>(std::move(grammar).value()));
  // The start state is computed now so that a grammar the parser cannot even begin fails here.
  OG_ASSIGN_OR_RETURN(const int32_t start, compiled->state_->automaton.start());
  compiled->matches_nothing_ = start == Automaton::kDead;
  return compiled;
}

CompiledConstraint::~CompiledConstraint() = default;

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<CompiledConstraint> compiled) : compiled_(std::move(compiled)) {
  CompiledState& shared = compiled_->state();
  std::lock_guard lock(shared.mutex);
  history_.push_back(Step{shared.automaton.start().value(), false});  // compile() computed it
}

size_t ConstraintMatcher::mask_words() const {
  return (static_cast<size_t>(compiled_->vocabulary().vocab_size()) + 63) / 64;
}

Status ConstraintMatcher::compute_mask(std::span<uint64_t> mask) {
  if (mask.size() != mask_words()) return OG_ERROR("constraint mask: ", mask.size(), " words given, ", mask_words(), " needed");
  const TokenTrie& trie = compiled_->vocabulary().trie();
  const Step now = history_.back();
  std::fill(mask.begin(), mask.end(), 0);
  if (!now.terminated) {
    OG_ASSIGN_OR_RETURN(const std::shared_ptr<const CompiledState::Mask> cached, compiled_->state().mask(now.state, trie));
    std::memcpy(mask.data(), cached->words.data(), mask.size() * sizeof(uint64_t));
  }
  if (now.terminated || is_complete()) {
    for (const int32_t id : trie.stop_ids()) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return Status::ok();
}

Status ConstraintMatcher::accept_token(int32_t id) {
  const TokenTrie& trie = compiled_->vocabulary().trie();
  if (id < 0 || id >= trie.vocab_size()) return OG_ERROR("constraint: token ", id, " is outside the vocabulary");
  const Step now = history_.back();
  CompiledState& shared = compiled_->state();
  const Grammar::Naming naming = now.terminated ? Grammar::Naming::kNone : shared.automaton.grammar().naming(id);  // fixed at compile
  if (naming != Grammar::Naming::kNone) {
    OG_ASSIGN_OR_RETURN(const int32_t next, take_named(shared, trie, now.state, id, naming == Grammar::Naming::kInSet));
    if (next != Automaton::kDead) {
      history_.push_back(Step{next, false});
      return Status::ok();
    }
    if (naming == Grammar::Naming::kAlone && !trie.is_stop(id)) {
      return OG_ERROR("constraint: token ", id, " is not allowed here (the grammar names it)");
    }
  }
  if (trie.is_stop(id)) {
    if (!now.terminated && !is_complete()) return OG_ERROR("constraint: stop token ", id, " before the output is complete");
    history_.push_back(Step{now.state, true});
    return Status::ok();
  }
  if (now.terminated) return OG_ERROR("constraint: token ", id, " after a stop token");
  if (trie.bytes(id).empty()) return OG_ERROR("constraint: special token ", id, " is allowed only where a grammar names it");
  return accept_bytes(trie.bytes(id)).with_context("constraint: token " + std::to_string(id));
}

Status ConstraintMatcher::accept_bytes(std::string_view bytes) {
  const Step now = history_.back();
  if (now.terminated) return OG_ERROR("constraint: text after a stop token");
  CompiledState& shared = compiled_->state();
  int32_t state = now.state;
  for (size_t i = 0; i < bytes.size(); ++i) {
    OG_ASSIGN_OR_RETURN(state, shared.next(state, static_cast<uint8_t>(bytes[i])));
    if (state == Automaton::kDead) return OG_ERROR("byte ", i, " of ", bytes.size(), " leaves the language");
  }
  history_.push_back(Step{state, false});
  return Status::ok();
}

bool ConstraintMatcher::is_complete() const {
  return compiled_->state().automaton.accepting(history_.back().state);  // no lock: see Automaton
}

Result<std::string> ConstraintMatcher::forced_bytes(size_t most) const {
  std::string forced;
  if (history_.back().terminated) return forced;
  CompiledState& shared = compiled_->state();
  std::lock_guard lock(shared.mutex);
  Automaton& automaton = shared.automaton;
  int32_t state = history_.back().state;
  while (forced.size() < most && !automaton.accepting(state) && automaton.token_symbols_at(state).empty()) {
    // The automaton refuses a byte only when no sentence continues with it, so a single byte it
    // takes is one every sentence takes here (a dead end included: the mask would force it too).
    int32_t only = Automaton::kDead;
    int ways = 0;
    uint8_t byte = 0;
    for (int b = 0; b < 256 && ways < 2; ++b) {
      OG_ASSIGN_OR_RETURN(const int32_t next, automaton.next(state, static_cast<uint8_t>(b)));
      if (next == Automaton::kDead) continue;
      ++ways;
      only = next;
      byte = static_cast<uint8_t>(b);
    }
    if (ways != 1) break;
    forced.push_back(static_cast<char>(byte));
    state = only;
  }
  return forced;
}

Status ConstraintMatcher::rollback(size_t count) {
  if (count > accepted()) return OG_ERROR("constraint: cannot roll back ", count, " steps; ", accepted(), " were taken");
  history_.resize(history_.size() - count);
  return Status::ok();
}

}  // namespace onnx_genai
