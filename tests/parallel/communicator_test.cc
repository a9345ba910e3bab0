// The in-process communicator: all-reduce and all-gather over 1..4 ranks on threads, results
// in rank order and the same on every rank and every repeat; abort releases waiting ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "parallel/communicator.h"

namespace onnx_genai {
namespace {

// Runs body(rank, communicator) on one thread per rank of a new group of `n`.
void on_ranks(int n, const std::function<void(int, Communicator&)>& body) {
  auto group = InProcessGroup::create(n);
  ASSERT_TRUE(group.is_ok()) << group.status().message();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    auto comm = (*group)->communicator(r);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    threads.emplace_back([r, comm = *comm, &body] { body(r, *comm); });
  }
  for (std::thread& t : threads) t.join();
}

// Values whose float sum depends on the order of addition.
float value(int rank, int64_t i) { return (rank % 2 == 0 ? 1e8f : 1.0f) * static_cast<float>((i + rank) % 7 + 1) / 3.0f; }

TEST(InProcessCommunicator, AllReduceSumsInRankOrderOnEveryRank) {
  for (int n = 1; n <= 4; ++n) {
    constexpr int64_t kCount = 1000;
    std::vector<float> want(kCount, 0.0f);
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < kCount; ++i) want[static_cast<size_t>(i)] += value(r, i);
    }
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    on_ranks(n, [&](int rank, Communicator& comm) {
      EXPECT_EQ(comm.rank(), rank);
      EXPECT_EQ(comm.world_size(), n);
      std::vector<float> data(kCount);
      for (int repeat = 0; repeat < 3; ++repeat) {  // repeats give the same bits
        for (int64_t i = 0; i < kCount; ++i) data[static_cast<size_t>(i)] = value(rank, i);
        ASSERT_TRUE(comm.all_reduce_sum(data.data(), kCount).is_ok());
        EXPECT_EQ(0, std::memcmp(data.data(), want.data(), sizeof(float) * kCount)) << n << " ranks, repeat " << repeat;
      }
      got[static_cast<size_t>(rank)] = data;
    });
    for (const auto& g : got) EXPECT_EQ(g, want) << n << " ranks";
  }
}

TEST(InProcessCommunicator, AllGatherJoinsRanksAlongTheAxis) {
  for (int n = 1; n <= 4; ++n) {
    constexpr int64_t kOuter = 3, kInner = 5;  // each rank's [3, 5] gives [3, 5 n]
    on_ranks(n, [&](int rank, Communicator& comm) {
      std::vector<int32_t> in(kOuter * kInner), out(static_cast<size_t>(kOuter * kInner * n), -1);
      for (int64_t o = 0; o < kOuter; ++o) {
        for (int64_t i = 0; i < kInner; ++i) in[static_cast<size_t>(o * kInner + i)] = static_cast<int32_t>(100 * rank + 10 * o + i);
      }
      ASSERT_TRUE(comm.all_gather(in.data(), out.data(), kOuter, kInner * 4).is_ok());
      for (int64_t o = 0; o < kOuter; ++o) {
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < kInner; ++i) {
            EXPECT_EQ(out[static_cast<size_t>((o * n + r) * kInner + i)], 100 * r + 10 * o + i);
          }
        }
      }
    });
  }
}

TEST(InProcessCommunicator, AbortReleasesWaitingRanks) {
  auto group = InProcessGroup::create(2);
  ASSERT_TRUE(group.is_ok());
  auto comm = (*group)->communicator(0);
  ASSERT_TRUE(comm.is_ok());
  std::thread waiter([&] {
    float x = 1;
    const Status s = (*comm)->all_reduce_sum(&x, 1);  // rank 1 never comes
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
  });
  (*group)->abort();
  waiter.join();
}

TEST(InProcessCommunicator, BadGroupsAreErrors) {
  for (int n : {0, -1}) {
    auto group = InProcessGroup::create(n);
    ASSERT_FALSE(group.is_ok());
    EXPECT_NE(group.status().message().find("at least one rank"), std::string::npos) << group.status().message();
  }
  auto group = InProcessGroup::create(2);
  ASSERT_TRUE(group.is_ok());
  EXPECT_FALSE((*group)->communicator(2).is_ok());
  EXPECT_FALSE((*group)->communicator(-1).is_ok());
}

}  // namespace
}  // namespace onnx_genai
