#pragma once

// Counters and histograms for the request path, without a lock: each thread writes to its
// own shard (one of kShards, picked once per thread), a scrape adds the shards up.
//
//   ShardedCounter      add(n) on the calling thread's shard; value() sums them
//   ShardedHistogram    observe(duration) into fixed latency buckets (kLatencyBounds);
//                       snapshot() sums the shards into counts per bucket and a sum
//
// A thread's shard is chosen round robin when it first records, so the event loops and
// grpc's threads spread over the shards; two threads that share a shard still count
// right (relaxed atomic adds), they only share a cache line. Values are read while other
// threads write: a scrape sees each cell at some moment, never a torn value.
//
// Threads: every method from any thread.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace infergate::gateway::telemetry {

inline constexpr size_t kShards = 8;

// The calling thread's shard, in [0, kShards).
size_t shardIndex();

// Latency bucket upper bounds, in nanoseconds: 10 us to 30 s, about x2-2.5 per step
// (an overhead of tens of microseconds and a model that takes tens of seconds both land
// in a bucket of their own).
inline constexpr std::array<int64_t, 20> kLatencyBounds = {
    10'000,        25'000,        50'000,         100'000,        250'000,
    500'000,       1'000'000,     2'500'000,      5'000'000,      10'000'000,
    25'000'000,    50'000'000,    100'000'000,    250'000'000,    500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000,  10'000'000'000, 30'000'000'000};
inline constexpr size_t kLatencyBuckets = kLatencyBounds.size() + 1;  // + the +Inf bucket

// The bucket of `nanoseconds` (negative values count as 0).
size_t latencyBucket(int64_t nanoseconds);

// One shard's cells of a histogram; kept inside a caller's cache-line-aligned shard.
struct HistogramCells {
  std::array<std::atomic<uint64_t>, kLatencyBuckets> counts{};
  std::atomic<uint64_t> sum_ns{0};

  void observe(std::chrono::nanoseconds d) {
    int64_t ns = d.count() < 0 ? 0 : d.count();
    counts[latencyBucket(ns)].fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
};

// The sum of some HistogramCells: counts per bucket (not cumulative) and the sum.
struct HistogramSnapshot {
  std::array<uint64_t, kLatencyBuckets> counts{};
  uint64_t sum_ns = 0;

  void add(const HistogramCells& cells) {
    for (size_t i = 0; i < kLatencyBuckets; ++i) {
      counts[i] += cells.counts[i].load(std::memory_order_relaxed);
    }
    sum_ns += cells.sum_ns.load(std::memory_order_relaxed);
  }
  void add(const HistogramSnapshot& other) {
    for (size_t i = 0; i < kLatencyBuckets; ++i) counts[i] += other.counts[i];
    sum_ns += other.sum_ns;
  }
  uint64_t count() const {
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    return n;
  }
};

class ShardedCounter {
 public:
  void add(uint64_t n = 1) {
    shards_[shardIndex()].value.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const {
    uint64_t total = 0;
    for (const Shard& s : shards_) total += s.value.load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> value{0};
  };
  std::array<Shard, kShards> shards_;
};

class ShardedHistogram {
 public:
  void observe(std::chrono::nanoseconds d) { shards_[shardIndex()].cells.observe(d); }
  HistogramSnapshot snapshot() const {
    HistogramSnapshot s;
    for (const Shard& shard : shards_) s.add(shard.cells);
    return s;
  }

 private:
  struct alignas(64) Shard {
    HistogramCells cells;
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace infergate::gateway::telemetry
