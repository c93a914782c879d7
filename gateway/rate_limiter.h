#pragma once

// The `rate_limits` section: token buckets per rule, and per principal and / or model
// where the rule says `per`.
//
//   take(principal, model, now)   OK, having taken one token from the bucket of every rule
//                                 that applies; or RESOURCE_EXHAUSTED marked as a rate
//                                 limit (HTTP 429, gRPC RESOURCE_EXHAUSTED) with the
//                                 seconds until a token is back (Retry-After). A refused
//                                 request takes nothing.
//
// A bucket starts full (burst tokens) and refills at requests_per_second. Buckets live in
// shards, each under its own mutex; a rule keeps at most kMaxBucketsPerShard buckets per
// shard, and makes room by dropping the buckets that are full again (a full bucket is
// the same as none). Buckets start over when a reload builds a new limiter.
//
// Threads: take() from any thread.

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::gateway {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxBucketsPerShard = 4096;

  explicit RateLimiter(std::vector<config::RateLimitConfig> rules);

  bool empty() const { return rules_.empty(); }
  // `principal`: the caller's name, "anonymous" without credentials.
  codecs::Status take(std::string_view principal, std::string_view model, Clock::time_point now);

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Bucket> buckets;
  };
  // Refills `b` to `now`; whether it had a token (then taken).
  static bool takeFrom(Bucket& b, const config::RateLimitConfig& rule, Clock::time_point now);
  Shard& shardOf(const std::string& key);
  void makeRoom(Shard& shard, Clock::time_point now);

  std::vector<config::RateLimitConfig> rules_;
  std::array<Shard, kShards> shards_;
};

}  // namespace infergate::gateway
