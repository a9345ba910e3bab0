// A device for tests without a GPU: host memory that the test tracks (so it can tell which side a
// pointer is on) standing in for device memory, copies that check their direction, and counters.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "runtime/execution_device.h"

namespace onnx_genai::testing {

// Host memory standing in for device memory: allocations are remembered, so a test can tell
// which side a pointer is on.
class StandInMemory final : public Allocator {
 public:
  Device device() const override { return {DeviceType::kCuda, 0}; }
  void* allocate(size_t bytes) override {
    if (bytes > free_bytes()) return nullptr;  // as a GPU does past its memory
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p != nullptr) {
      blocks_[static_cast<char*>(p)] = bytes;
      used_ += bytes;
    }
    return p;
  }
  void deallocate(void* p) override {
    auto it = blocks_.find(static_cast<char*>(p));
    if (it != blocks_.end()) {
      used_ -= it->second;
      blocks_.erase(it);
    }
    std::free(p);
  }
  size_t free_bytes() const override { return capacity > used_ ? capacity - used_ : 0; }
  size_t capacity = size_t{1} << 40;  // a test shrinks it to run out of memory
  Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
    return cpu_allocator().copy_rows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
  }
  Status zero(void* dst, size_t bytes) override { return cpu_allocator().zero(dst, bytes); }

  bool owns(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    auto it = blocks_.upper_bound(const_cast<char*>(c));
    if (it == blocks_.begin()) return false;
    --it;
    return c >= it->first && c < it->first + std::max<size_t>(it->second, 1);
  }

 private:
  std::map<char*, size_t> blocks_;
  size_t used_ = 0;
};

// `memory` outlives the device (the device's uploaded constants go back to it when it dies).
// `kernels`: whose registered kernels run here (the CPU's, for whole models in host memory).
class StandInDevice final : public ExecutionDevice {
 public:
  explicit StandInDevice(StandInMemory& memory, DeviceType kernels = DeviceType::kCuda)
      : memory_(memory), kernels_(kernels) {}
  Device device() const override { return memory_.device(); }
  DeviceType kernel_device() const override { return kernels_; }
  Allocator& allocator() override { return memory_; }
  void* stream() const override { return const_cast<int*>(&stream_tag_); }
  Status activate() override { return Status::ok(); }
  Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    EXPECT_TRUE(memory_.owns(dst) && !memory_.owns(src)) << "a copy to the device goes from host to device memory";
    std::memcpy(dst, src, bytes);
    ++uploads;
    return Status::ok();
  }
  Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    EXPECT_TRUE(!memory_.owns(dst) && memory_.owns(src)) << "a copy to the host goes from device to host memory";
    std::memcpy(dst, src, bytes);
    ++downloads;
    downloaded_bytes += static_cast<int64_t>(bytes);
    return Status::ok();
  }
  Status copy_on_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status synchronize() override {
    ++syncs;
    return Status::ok();
  }

  // Records by keeping the queued work and replays by queuing it again: the plan's bookkeeping
  // of recorded segments runs as on a GPU, with whichever kernels run here. Like a CUDA graph, a
  // recording runs nothing until replayed.
  bool can_record() const override { return recordable; }
  Result<std::unique_ptr<Recording>> record(const std::function<Status()>& queue) override {
    if (refuse_recording) return OG_ERROR("the stand-in device refused to record");
    ++recordings;
    return std::unique_ptr<Recording>(new KeptWork(queue, replays));
  }

  const StandInMemory& memory() const { return memory_; }
  int uploads = 0, downloads = 0, syncs = 0;
  int64_t downloaded_bytes = 0;
  bool recordable = true;
  bool refuse_recording = false;  // as a GPU refuses work that synchronises or allocates
  int recordings = 0, replays = 0;

 private:
  class KeptWork final : public Recording {
   public:
    KeptWork(std::function<Status()> queue, int& replays) : queue_(std::move(queue)), replays_(replays) {}
    Status replay() override {
      ++replays_;
      return queue_();
    }

   private:
    std::function<Status()> queue_;
    int& replays_;
  };

  StandInMemory& memory_;
  DeviceType kernels_;
  int stream_tag_ = 0;
};

// While alive, a session asked for a GPU gets a stand-in device over `memory` running the CPU
// kernels (a whole model in host memory); `opened` counts the devices made and `device` is the
// last one (alive while its session is).
class StandInScope {
 public:
  explicit StandInScope(StandInMemory& memory) {
    set_execution_device_opener_for_tests([&memory, this](Device) -> Result<std::unique_ptr<ExecutionDevice>> {
      ++opened;
      auto made = std::make_unique<StandInDevice>(memory, DeviceType::kCpu);
      device = made.get();
      return std::unique_ptr<ExecutionDevice>(std::move(made));
    });
  }
  ~StandInScope() { set_execution_device_opener_for_tests(nullptr); }
  StandInScope(const StandInScope&) = delete;
  StandInScope& operator=(const StandInScope&) = delete;
  int opened = 0;
  StandInDevice* device = nullptr;
};

}  // namespace onnx_genai::testing
