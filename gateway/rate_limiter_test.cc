// Token buckets: burst then refill, per principal and per model, refusals that take
// nothing, Retry-After, and buckets dropped when full again.

#include "gateway/rate_limiter.h"

#include <gtest/gtest.h>

#include "gateway/error_mapping.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway {
namespace {

using std::chrono::milliseconds;

config::RateLimitConfig rule(double rps, uint32_t burst) {
  config::RateLimitConfig r;
  r.requests_per_second = rps;
  r.burst = burst;
  return r;
}

TEST(RateLimiter, BurstThenRefillAtTheRate) {
  RateLimiter limiter({rule(2, 3)});
  const auto t0 = RateLimiter::Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.take("a", "m", t0).ok()) << i;
  codecs::Status refused = limiter.take("a", "m", t0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(isRateLimit(refused));
  EXPECT_EQ(upstream::retryAfterOf(refused), 1u);
  EXPECT_NE(codecs::messageOf(refused).find("rate_limits[0]"), std::string_view::npos);
  EXPECT_FALSE(limiter.take("a", "m", t0 + milliseconds(400)).ok()) << "0.8 tokens";
  EXPECT_TRUE(limiter.take("a", "m", t0 + milliseconds(520)).ok()) << "1.04 tokens";
  EXPECT_FALSE(limiter.take("a", "m", t0 + milliseconds(530)).ok());
  // Never more than the burst, however long it waited.
  const auto later = t0 + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.take("a", "m", later).ok());
  EXPECT_FALSE(limiter.take("a", "m", later).ok());
}

TEST(RateLimiter, RetryAfterCoversTheWaitForOneToken) {
  RateLimiter limiter({rule(0.1, 1)});
  const auto t0 = RateLimiter::Clock::now();
  ASSERT_TRUE(limiter.take("a", "m", t0).ok());
  EXPECT_EQ(upstream::retryAfterOf(limiter.take("a", "m", t0)), 10u);
  EXPECT_EQ(upstream::retryAfterOf(limiter.take("a", "m", t0 + std::chrono::seconds(4))), 6u);
}

TEST(RateLimiter, PerPrincipalAndPerModelBuckets) {
  config::RateLimitConfig per_principal = rule(1, 1);
  per_principal.per_principal = true;
  config::RateLimitConfig per_model = rule(1, 2);
  per_model.per_model = true;
  per_model.model = "big";
  RateLimiter limiter({per_principal, per_model});
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(limiter.take("alice", "small", t0).ok());
  EXPECT_FALSE(limiter.take("alice", "small", t0).ok());
  EXPECT_TRUE(limiter.take("bob", "big", t0).ok()) << "bob has his own bucket";
  EXPECT_TRUE(limiter.take("carol", "big", t0).ok());
  codecs::Status third = limiter.take("dave", "big", t0);
  ASSERT_FALSE(third.ok()) << "the model's bucket holds 2";
  EXPECT_NE(codecs::messageOf(third).find("rate_limits[1] (per model)"), std::string_view::npos);
  // dave's refusal by the model rule gave his principal token back.
  EXPECT_TRUE(limiter.take("dave", "small", t0).ok());
}

TEST(RateLimiter, RulesApplyOnlyToTheirPrincipalAndModel) {
  config::RateLimitConfig ci = rule(1, 1);
  ci.principal = "ci";
  config::RateLimitConfig anonymous = rule(1, 1);
  anonymous.principal = "anonymous";
  RateLimiter limiter({ci, anonymous});
  const auto t0 = RateLimiter::Clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.take("web", "m", t0).ok());
  EXPECT_TRUE(limiter.take("ci", "m", t0).ok());
  EXPECT_FALSE(limiter.take("ci", "m", t0).ok());
  EXPECT_TRUE(limiter.take("anonymous", "m", t0).ok());
  EXPECT_FALSE(limiter.take("anonymous", "m", t0).ok());
}

TEST(RateLimiter, ManyPrincipalsStayBounded) {
  config::RateLimitConfig per_principal = rule(1000, 1);
  per_principal.per_principal = true;
  RateLimiter limiter({per_principal});
  auto t = RateLimiter::Clock::now();
  // Far more principals than a shard keeps: buckets full again are dropped to make room,
  // and each new principal still gets its token.
  for (int i = 0; i < static_cast<int>(RateLimiter::kShards * RateLimiter::kMaxBucketsPerShard) + 5000; ++i) {
    t += std::chrono::microseconds(10);
    ASSERT_TRUE(limiter.take(std::to_string(i), "m", t).ok()) << i;
  }
}

}  // namespace
}  // namespace infergate::gateway
