#include "gateway/telemetry/sharded.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace infergate::gateway::telemetry {
namespace {

TEST(LatencyBucket, AValueOnABoundBelongsToThatBoundsBucket) {
  EXPECT_EQ(latencyBucket(0), 0u);
  EXPECT_EQ(latencyBucket(-5), 0u);
  EXPECT_EQ(latencyBucket(10'000), 0u);
  EXPECT_EQ(latencyBucket(10'001), 1u);
  EXPECT_EQ(latencyBucket(25'000), 1u);
  EXPECT_EQ(latencyBucket(1'000'000'000), 15u);
  EXPECT_EQ(latencyBucket(30'000'000'000), kLatencyBounds.size() - 1);
  EXPECT_EQ(latencyBucket(30'000'000'001), kLatencyBounds.size());  // +Inf
}

TEST(ShardIndex, StaysTheSameOnAThreadAndSpreadsOverThreads) {
  size_t first = shardIndex();
  EXPECT_EQ(shardIndex(), first);
  std::set<size_t> seen;
  std::vector<std::thread> threads;
  std::mutex mu;
  for (size_t i = 0; i < kShards; ++i) {
    threads.emplace_back([&] {
      size_t s = shardIndex();
      EXPECT_LT(s, kShards);
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(s);
    });
  }
  for (auto& t : threads) t.join();
  // kShards new threads take kShards consecutive round-robin slots: every shard once.
  EXPECT_EQ(seen.size(), kShards);
}

TEST(ShardedCounter, AddsUpWritesFromManyThreads) {
  ShardedCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.add(2);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.value(), 6u * 10000u * 2u);
}

TEST(ShardedHistogram, CountsPerBucketAndSumsAcrossThreads) {
  ShardedHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        h.observe(std::chrono::microseconds(20));   // bucket 1 (<= 25 us)
        h.observe(std::chrono::milliseconds(3));    // bucket 8 (<= 5 ms)
      }
    });
  }
  for (auto& t : threads) t.join();
  HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count(), 8000u);
  EXPECT_EQ(s.counts[1], 4000u);
  EXPECT_EQ(s.counts[8], 4000u);
  EXPECT_EQ(s.sum_ns, 4000ull * 20000ull + 4000ull * 3000000ull);
}

}  // namespace
}  // namespace infergate::gateway::telemetry
