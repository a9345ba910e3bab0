#include "engine/scheduler.h"

#include <algorithm>

namespace onnx_genai::engine {

namespace {

// Waiting order: higher priority first, then earlier arrival.
bool goes_before(const ScheduledState* a, const ScheduledState* b) {
  return a->priority != b->priority ? a->priority > b->priority : a->arrival < b->arrival;
}

}  // namespace

void Scheduler::add(ScheduledState* request) {
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), request, goes_before), request);
}

void Scheduler::free_blocks(ScheduledState& r) {
  r.drop_draft();
  pool_.release(r.blocks);
  r.blocks.clear();
  r.block_keys.clear();
  r.computed = 0;
}

void Scheduler::remove(ScheduledState* request) {
  std::erase(waiting_, request);
  std::erase(running_, request);
  free_blocks(*request);
}

bool Scheduler::reserve_blocks(ScheduledState& r, int64_t tokens_after) {
  const int64_t bs = pool_.block_size();
  const int64_t need = (tokens_after + bs - 1) / bs - static_cast<int64_t>(r.blocks.size());
  return need <= 0 || pool_.allocate(need, r.blocks);
}

// Preempts the running request of lowest priority (latest arrival among equals) other than
// `needing` that this step has not scheduled yet (those follow `needing` in running_).
bool Scheduler::preempt_for(const ScheduledState& needing) {
  auto self = std::find(running_.begin(), running_.end(), &needing);
  auto victim = running_.end();
  for (auto it = self + 1; it != running_.end(); ++it) {
    if (victim == running_.end() || !goes_before(*it, *victim)) victim = it;
  }
  if (victim == running_.end()) return false;
  ScheduledState* r = *victim;
  running_.erase(victim);
  free_blocks(*r);
  ++r->preemptions;
  ++preemptions_;
  add(r);
  return true;
}

std::vector<ScheduledRun> Scheduler::schedule() {
  std::vector<ScheduledRun> runs;
  int64_t budget = limits_.max_num_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    ScheduledState& r = *running_[i];
    if (r.draft > 0 && r.pending() > budget) r.drop_draft();  // a draft is verified whole or not at all
    const int64_t n = std::min(r.pending(), budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool fits = reserve_blocks(r, r.computed + n);
    while (!fits && preempt_for(r)) fits = reserve_blocks(r, r.computed + n);
    if (!fits) {
      // Nothing left to take blocks from: this request yields them and waits.
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      free_blocks(r);
      ++r.preemptions;
      ++preemptions_;
      add(&r);
      continue;
    }
    runs.push_back(ScheduledRun{&r, r.computed, n});
    budget -= n;
    ++i;
  }
  admit_waiting(budget, runs);
  return runs;
}

void Scheduler::admit_waiting(int64_t& budget, std::vector<ScheduledRun>& runs) {
  const int64_t bs = pool_.block_size();
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_num_seqs && budget > 0) {
    ScheduledState& r = *waiting_.front();
    if (r.blocks.empty()) {
      // At least one token stays to compute: its logits are what the request samples from.
      const auto known = static_cast<int64_t>(r.tokens.size());
      r.blocks = pool_.match_prefix(r.tokens, r.cache_salt, (known - 1) / bs, r.block_keys);
      r.computed = static_cast<int64_t>(r.blocks.size()) * bs;
      r.cached_prefix_tokens = r.computed;
    }
    const int64_t n = std::min(r.pending(), budget);
    if (!reserve_blocks(r, r.computed + n)) {
      free_blocks(r);
      r.cached_prefix_tokens = 0;
      return;
    }
    waiting_.pop_front();
    running_.push_back(&r);
    runs.push_back(ScheduledRun{&r, r.computed, n});
    budget -= n;
  }
}

void Scheduler::complete(const std::vector<ScheduledRun>& runs) {
  for (const ScheduledRun& run : runs) {
    ScheduledState& r = *run.request;
    r.computed = run.first + run.count;
    const int64_t confirmed = r.computed - r.draft;
    pool_.commit_full_blocks(r.blocks, r.tokens, confirmed / pool_.block_size(), r.cache_salt, r.block_keys);
  }
}

void Scheduler::rewind(ScheduledState& r, int64_t computed) {
  const int64_t bs = pool_.block_size();
  r.computed = computed;
  const auto needed = static_cast<size_t>((static_cast<int64_t>(r.tokens.size()) + bs - 1) / bs);
  if (r.blocks.size() > needed) {
    pool_.release(std::span<const int32_t>(r.blocks).subspan(needed));
    r.blocks.resize(needed);
  }
  pool_.commit_full_blocks(r.blocks, r.tokens, computed / bs, r.cache_salt, r.block_keys);
}

}  // namespace onnx_genai::engine
