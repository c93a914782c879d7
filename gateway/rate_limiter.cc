#include "gateway/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway {
namespace {

using Seconds = std::chrono::duration<double>;

}  // namespace

RateLimiter::RateLimiter(std::vector<config::RateLimitConfig> rules) : rules_(std::move(rules)) {}

bool RateLimiter::takeFrom(Bucket& b, const config::RateLimitConfig& rule, Clock::time_point now) {
  const double elapsed = std::max(0.0, Seconds(now - b.last).count());
  b.tokens = std::min<double>(rule.burst, b.tokens + elapsed * rule.requests_per_second);
  b.last = now;
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

RateLimiter::Shard& RateLimiter::shardOf(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

void RateLimiter::makeRoom(Shard& shard, Clock::time_point now) {
  // A bucket full again is as good as a new one: drop those. The rules are found by the
  // index the key starts with.
  for (auto it = shard.buckets.begin(); it != shard.buckets.end();) {
    const config::RateLimitConfig& rule = rules_[static_cast<unsigned char>(it->first[0])];
    const double elapsed = Seconds(now - it->second.last).count();
    if (it->second.tokens + elapsed * rule.requests_per_second >= rule.burst) {
      it = shard.buckets.erase(it);
    } else {
      ++it;
    }
  }
}

codecs::Status RateLimiter::take(std::string_view principal, std::string_view model, Clock::time_point now) {
  // Rule indexes are stored in the key's first byte: at most 256 rules (the loader's cap).
  struct Taken {
    Shard* shard;
    std::string key;
  };
  std::vector<Taken> taken;
  for (size_t i = 0; i < rules_.size() && i < 256; ++i) {
    const config::RateLimitConfig& rule = rules_[i];
    if (!rule.principal.empty() && rule.principal != principal) continue;
    if (!rule.model.empty() && rule.model != model) continue;
    std::string key(1, static_cast<char>(i));
    if (rule.per_principal) key.append(principal).push_back('\0');
    if (rule.per_model) key.append(model);
    Shard& shard = shardOf(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto found = shard.buckets.find(key);
    if (found == shard.buckets.end()) {
      if (shard.buckets.size() >= kMaxBucketsPerShard) makeRoom(shard, now);
      found = shard.buckets.emplace(key, Bucket{static_cast<double>(rule.burst), now}).first;
    }
    if (!takeFrom(found->second, rule, now)) {
      const double wait = (1.0 - found->second.tokens) / rule.requests_per_second;
      const auto after = static_cast<uint32_t>(std::max(1.0, std::ceil(wait)));
      // Give back what the earlier rules gave: a refused request costs nothing.
      for (Taken& t : taken) {
        std::lock_guard<std::mutex> back(t.shard->mu);
        auto it = t.shard->buckets.find(t.key);
        if (it != t.shard->buckets.end()) it->second.tokens += 1.0;
      }
      std::string scope = rule.per_principal && rule.per_model ? "principal and model"
                          : rule.per_principal                 ? "principal"
                          : rule.per_model                     ? "model"
                                                               : "rule";
      return asRateLimit(upstream::withRetryAfter(
          absl::ResourceExhaustedError(codecs::strCat("rate limit of rate_limits[", i, "] (per ", scope,
                                                      ") reached; retry after ", after, " s")),
          after));
    }
    taken.push_back(Taken{&shard, std::move(key)});
  }
  return absl::OkStatus();
}

}  // namespace infergate::gateway
