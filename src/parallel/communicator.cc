// The in-process group (communicator.h).
#include "parallel/communicator.h"

#include <algorithm>
#include <cstring>

namespace onnx_genai {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }

  Status all_reduce_sum(float* data, int64_t count) override {
    if (count < 0) return OG_ERROR("all_reduce_sum on rank ", rank_, ": negative count ", count);
    InProcessGroup& g = *group_;
    g.published_[static_cast<size_t>(rank_)] = data;
    OG_RETURN_IF_ERROR(g.arrive_and_wait());
    sums_.assign(static_cast<size_t>(count), 0.0f);
    for (const void* from : g.published_) {
      const auto* x = static_cast<const float*>(from);
      for (int64_t i = 0; i < count; ++i) sums_[static_cast<size_t>(i)] += x[i];
    }
    // Every rank has read every buffer before any is overwritten.
    OG_RETURN_IF_ERROR(g.arrive_and_wait());
    std::copy(sums_.begin(), sums_.end(), data);
    return Status::ok();
  }

  Status all_gather(const void* in, void* out, int64_t outer, int64_t inner_bytes) override {
    if (outer < 0 || inner_bytes < 0) {
      return OG_ERROR("all_gather on rank ", rank_, ": negative extent (", outer, " x ", inner_bytes, " bytes)");
    }
    InProcessGroup& g = *group_;
    g.published_[static_cast<size_t>(rank_)] = in;
    OG_RETURN_IF_ERROR(g.arrive_and_wait());
    const auto run = static_cast<size_t>(inner_bytes);
    const size_t ranks = g.published_.size();
    for (int64_t o = 0; o < outer; ++o) {
      for (size_t r = 0; r < ranks; ++r) {
        std::memcpy(static_cast<char*>(out) + (static_cast<size_t>(o) * ranks + r) * run,
                    static_cast<const char*>(g.published_[r]) + static_cast<size_t>(o) * run, run);
      }
    }
    return g.arrive_and_wait();  // no rank's input changes while another still reads it
  }

 private:
  std::shared_ptr<InProcessGroup> group_;
  int rank_;
  std::vector<float> sums_;  // this rank's sum, before it overwrites its published buffer
};

InProcessGroup::InProcessGroup(int world_size)
    : world_size_(world_size), published_(static_cast<size_t>(world_size), nullptr) {}

Result<std::shared_ptr<InProcessGroup>> InProcessGroup::create(int world_size) {
  if (world_size <= 0) return OG_ERROR("a process group needs at least one rank, got ", world_size);
  return std::shared_ptr<InProcessGroup>(new InProcessGroup(world_size));
}

Result<std::shared_ptr<Communicator>> InProcessGroup::communicator(int rank) {
  if (rank < 0 || rank >= world_size_) return OG_ERROR("rank ", rank, " is outside a group of ", world_size_);
  return std::shared_ptr<Communicator>(std::make_shared<InProcessCommunicator>(shared_from_this(), rank));
}

// A generation-counting barrier: the last rank to arrive starts the next generation and wakes the
// others, who wait for the generation they arrived in to end.
Status InProcessGroup::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (aborted_) return OG_ERROR("the tensor-parallel group was aborted (another rank failed)");
  const uint64_t generation = generation_;
  if (++waiting_ == world_size_) {
    waiting_ = 0;
    ++generation_;
    arrived_.notify_all();
    return Status::ok();
  }
  arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ != generation) return Status::ok();
  return OG_ERROR("the tensor-parallel group was aborted (another rank failed)");
}

void InProcessGroup::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  arrived_.notify_all();
}

}  // namespace onnx_genai
