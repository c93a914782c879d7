#include "routing/load_balancer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "routing/routing_test_util.h"  // counts allocations, to prove pick() makes none

namespace infergate::routing {
namespace {

using Policy = config::LoadBalancingConfig::Policy;

constexpr Policy kPolicies[] = {Policy::kRoundRobin, Policy::kLeastRequest, Policy::kLoadAware};

EndpointLoad up(uint8_t tier = 0, uint32_t outstanding = 0, uint64_t queue = 0) {
  return {true, tier, outstanding, queue};
}
EndpointLoad down(uint8_t tier = 0) { return {false, tier, 0, 0}; }

// How often each endpoint is picked over `picks` draws from a fixed-seed generator.
std::vector<size_t> histogram(const LoadBalancer& lb, const std::vector<EndpointLoad>& eps,
                              size_t picks, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> counts(eps.size(), 0);
  for (size_t i = 0; i < picks; ++i) {
    size_t picked = lb.pick(eps, rng());
    EXPECT_LT(picked, eps.size());
    if (picked < eps.size()) ++counts[picked];
  }
  return counts;
}

void expectNear(size_t actual, double expected, double tolerance) {
  EXPECT_GE(actual, expected * (1 - tolerance)) << "expected about " << expected;
  EXPECT_LE(actual, expected * (1 + tolerance)) << "expected about " << expected;
}

// --- every policy --------------------------------------------------------------------

TEST(LoadBalancer, ReportsItsPolicy) {
  for (Policy policy : kPolicies) EXPECT_EQ(LoadBalancer(policy).policy(), policy);
}

TEST(LoadBalancer, NoEndpointWhenEmptyOrAllUnavailable) {
  std::vector<EndpointLoad> none;
  std::vector<EndpointLoad> all_down = {down(0), down(1), down(0)};
  for (Policy policy : kPolicies) {
    LoadBalancer lb(policy);
    for (uint64_t draw : {uint64_t{0}, uint64_t{12345}, UINT64_MAX}) {
      EXPECT_EQ(lb.pick(none, draw), kNoEndpoint);
      EXPECT_EQ(lb.pick(all_down, draw), kNoEndpoint);
    }
  }
}

TEST(LoadBalancer, NeverPicksAnUnavailableEndpoint) {
  // The unavailable ones are the least loaded by every measure: a policy that ignored the
  // flag would pick them first.
  std::vector<EndpointLoad> eps = {down(), up(0, 50, 50), down(), up(0, 60, 60), down()};
  for (Policy policy : kPolicies) {
    std::vector<size_t> counts = histogram(LoadBalancer(policy), eps, 5000);
    EXPECT_EQ(counts[0] + counts[2] + counts[4], 0u);
    EXPECT_EQ(counts[1] + counts[3], 5000u);
  }
}

TEST(LoadBalancer, SingleAvailableEndpointTakesEverything) {
  std::vector<EndpointLoad> eps = {down(), down(), up(0, 1000, 1000)};
  for (Policy policy : kPolicies) {
    LoadBalancer lb(policy);
    for (uint64_t draw : {uint64_t{0}, uint64_t{0x8000000080000000}, UINT64_MAX}) {
      EXPECT_EQ(lb.pick(eps, draw), 2u);
    }
  }
}

TEST(LoadBalancer, SpillOverTierOnlyWhileTierZeroIsUnavailable) {
  // The spill-over endpoints are idle and the colocated one is busy: tier still wins.
  std::vector<EndpointLoad> eps = {up(1, 0, 0), up(0, 500, 500), up(1, 0, 0)};
  for (Policy policy : kPolicies) {
    std::vector<size_t> counts = histogram(LoadBalancer(policy), eps, 3000);
    EXPECT_EQ(counts[1], 3000u) << static_cast<int>(policy);
  }
  eps[1].available = false;
  for (Policy policy : kPolicies) {
    std::vector<size_t> counts = histogram(LoadBalancer(policy), eps, 3000);
    EXPECT_EQ(counts[1], 0u);
    EXPECT_GT(counts[0], 0u) << static_cast<int>(policy);
    EXPECT_GT(counts[2], 0u) << static_cast<int>(policy);
  }
}

TEST(LoadBalancer, ThirdTierOnlyWhenTheFirstTwoAreUnavailable) {
  std::vector<EndpointLoad> eps = {up(2), down(0), up(1), down(1)};
  for (Policy policy : kPolicies) {
    std::vector<size_t> counts = histogram(LoadBalancer(policy), eps, 1000);
    EXPECT_EQ(counts[2], 1000u);
  }
  eps[2].available = false;
  for (Policy policy : kPolicies) {
    std::vector<size_t> counts = histogram(LoadBalancer(policy), eps, 1000);
    EXPECT_EQ(counts[0], 1000u);
  }
}

TEST(LoadBalancer, PickDoesNotAllocate) {
  std::vector<EndpointLoad> eps = {up(0, 3, 3), up(0, 1, 9), down(), up(1, 0, 0)};
  for (Policy policy : kPolicies) {
    LoadBalancer lb(policy);
    size_t allocations = testing::allocationsDuring([&] {
      for (uint64_t draw = 0; draw < 100; ++draw) lb.pick(eps, draw * 0x9E3779B97F4A7C15ull);
    });
    EXPECT_EQ(allocations, 0u);
  }
}

// --- round robin ---------------------------------------------------------------------

TEST(LoadBalancerRoundRobin, IsExactlyEven) {
  LoadBalancer lb(Policy::kRoundRobin);
  std::vector<EndpointLoad> eps(4, up());
  std::vector<size_t> counts = histogram(lb, eps, 4000);
  EXPECT_EQ(counts, (std::vector<size_t>{1000, 1000, 1000, 1000}));
}

TEST(LoadBalancerRoundRobin, VisitsEndpointsInTurn) {
  LoadBalancer lb(Policy::kRoundRobin);
  std::vector<EndpointLoad> eps(3, up());
  std::vector<size_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(lb.pick(eps, 0));
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(LoadBalancerRoundRobin, UnavailableEndpointsTurnsAreSharedByAllOthers) {
  // Skipping forward from the counter's slot would hand endpoint 1's turns to endpoint 2
  // (half again its share); the others must share evenly instead.
  LoadBalancer lb(Policy::kRoundRobin);
  std::vector<EndpointLoad> eps = {up(), down(), up(), up()};
  std::vector<size_t> counts = histogram(lb, eps, 3000);
  EXPECT_EQ(counts, (std::vector<size_t>{1000, 0, 1000, 1000}));
}

TEST(LoadBalancerRoundRobin, IgnoresLoad) {
  LoadBalancer lb(Policy::kRoundRobin);
  std::vector<EndpointLoad> eps = {up(0, 0, 0), up(0, 1000, 1000)};
  EXPECT_EQ(histogram(lb, eps, 2000), (std::vector<size_t>{1000, 1000}));
}

TEST(LoadBalancerRoundRobin, ExactlyEvenFromManyThreads) {
  // Each fetch_add hands out a distinct turn, so the totals are exact however the four
  // threads interleave.
  LoadBalancer lb(Policy::kRoundRobin);
  std::vector<EndpointLoad> eps(4, up());
  constexpr size_t kPerThread = 2000;
  std::vector<std::vector<size_t>> counts(4, std::vector<size_t>(4, 0));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < kPerThread; ++i) ++counts[t][lb.pick(eps, 0)];
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t e = 0; e < 4; ++e) {
    size_t total = counts[0][e] + counts[1][e] + counts[2][e] + counts[3][e];
    EXPECT_EQ(total, kPerThread);
  }
}

// --- least request (power of two choices) --------------------------------------------

TEST(LoadBalancerLeastRequest, NeverPicksTheLoadedOneOfTwo) {
  // With two endpoints both are always candidates, so the loaded one must never win,
  // whatever the draw (edges and both halves' extremes included).
  LoadBalancer lb(Policy::kLeastRequest);
  std::vector<EndpointLoad> eps = {up(0, 0), up(0, 100)};
  std::vector<EndpointLoad> swapped = {up(0, 100), up(0, 0)};
  std::vector<uint64_t> draws = {0, 1, UINT64_MAX, 0xFFFFFFFF, 0xFFFFFFFF00000000ull,
                                 0x8000000080000000ull, 0x7FFFFFFF7FFFFFFFull};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) draws.push_back(rng());
  for (uint64_t draw : draws) {
    ASSERT_EQ(lb.pick(eps, draw), 0u) << draw;
    ASSERT_EQ(lb.pick(swapped, draw), 1u) << draw;
  }
}

TEST(LoadBalancerLeastRequest, PrefersTheLessLoaded) {
  // Three endpoints: the least loaded wins whenever it is a candidate (2/3 of draws), the
  // middle one otherwise, and the most loaded never (it always loses to its partner).
  LoadBalancer lb(Policy::kLeastRequest);
  std::vector<EndpointLoad> eps = {up(0, 5), up(0, 0), up(0, 10)};
  std::vector<size_t> counts = histogram(lb, eps, 30000);
  EXPECT_EQ(counts[2], 0u);
  expectNear(counts[1], 20000, 0.05);
  expectNear(counts[0], 10000, 0.05);
}

TEST(LoadBalancerLeastRequest, TiesSpreadEvenly) {
  LoadBalancer lb(Policy::kLeastRequest);
  std::vector<EndpointLoad> eps(4, up(0, 7));
  std::vector<size_t> counts = histogram(lb, eps, 40000);
  for (size_t count : counts) expectNear(count, 10000, 0.05);
}

TEST(LoadBalancerLeastRequest, SameDrawSamePick) {
  LoadBalancer lb(Policy::kLeastRequest);
  std::vector<EndpointLoad> eps = {up(0, 3), up(0, 3), up(0, 1), up(0, 3), up(0, 2)};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    uint64_t draw = rng();
    ASSERT_EQ(lb.pick(eps, draw), lb.pick(eps, draw));
  }
}

TEST(LoadBalancerLeastRequest, CandidatesComeFromTheBestTierOnly) {
  // The tier-1 endpoint is idle, but never a candidate while tier 0 has two.
  LoadBalancer lb(Policy::kLeastRequest);
  std::vector<EndpointLoad> eps = {up(0, 40), up(1, 0), up(0, 50)};
  std::vector<size_t> counts = histogram(lb, eps, 5000);
  EXPECT_EQ(counts, (std::vector<size_t>{5000, 0, 0}));
}

// --- load aware ----------------------------------------------------------------------

TEST(LoadBalancerLoadAware, PicksTheSmallestQueue) {
  LoadBalancer lb(Policy::kLoadAware);
  // Outstanding says the opposite: load aware reads the queue only.
  std::vector<EndpointLoad> eps = {up(0, 0, 7), up(0, 90, 3), up(0, 0, 9), up(0, 0, 4)};
  std::vector<size_t> counts = histogram(lb, eps, 5000);
  EXPECT_EQ(counts, (std::vector<size_t>{0, 5000, 0, 0}));
}

TEST(LoadBalancerLoadAware, TiesSpreadOverTheLeastLoaded) {
  LoadBalancer lb(Policy::kLoadAware);
  std::vector<EndpointLoad> eps = {up(0, 0, 5), up(0, 0, 1), up(0, 0, 1), up(0, 0, 1)};
  std::vector<size_t> counts = histogram(lb, eps, 30000);
  EXPECT_EQ(counts[0], 0u);
  for (size_t i = 1; i < 4; ++i) expectNear(counts[i], 10000, 0.05);
}

TEST(LoadBalancerLoadAware, TieBreakFollowsTheDraw) {
  LoadBalancer lb(Policy::kLoadAware);
  std::vector<EndpointLoad> eps = {up(0, 0, 2), up(0, 0, 2)};
  EXPECT_EQ(lb.pick(eps, 0), 0u);
  EXPECT_EQ(lb.pick(eps, UINT64_MAX), 1u);
  EXPECT_EQ(lb.pick(eps, 0x1234), lb.pick(eps, 0x1234));
}

TEST(LoadBalancerLoadAware, AnUnavailableEmptyQueueDoesNotCount) {
  LoadBalancer lb(Policy::kLoadAware);
  std::vector<EndpointLoad> eps = {{false, 0, 0, 0}, up(0, 0, 8), up(0, 0, 6)};
  EXPECT_EQ(histogram(lb, eps, 1000), (std::vector<size_t>{0, 0, 1000}));
}

// --- rendezvous hashing --------------------------------------------------------------

TEST(StableHash64, ValuesNeverChange) {
  // Pinned: every gateway replica and every build must send a key to the same endpoint.
  // If this fails, the hash changed and hashed clients will move on the next upgrade.
  EXPECT_EQ(stableHash64(""), 0xe220a8397b1dcdafull);
  EXPECT_EQ(stableHash64("a"), 0x7171fd973fbae05cull);
  EXPECT_EQ(stableHash64("10.0.0.1:8001"), 0x74c8168e86f831c6ull);
  EXPECT_EQ(stableHash64("sequence-0123456789abcdef"), 0x8cb34b503ac3e471ull);
  EXPECT_EQ(stableHash64("10.0.0.1:8001", 42), 0x506afb6b6417a744ull);
}

TEST(StableHash64, LengthAndSeedMatter) {
  using namespace std::string_view_literals;
  EXPECT_NE(stableHash64("a"sv), stableHash64("a\0"sv));
  EXPECT_NE(stableHash64("abcdefgh"sv), stableHash64("abcdefgh\0"sv));
  EXPECT_NE(stableHash64("x", 1), stableHash64("x", 2));
  EXPECT_NE(stableHash64("ab"), stableHash64("ba"));
}

class PickByHash : public ::testing::Test {
 protected:
  static std::string keyOf(size_t i) { return "tenant-" + std::to_string(i); }
};

TEST_F(PickByHash, SameKeySameEndpointWhateverTheOrder) {
  std::vector<EndpointLoad> eps(4, up());
  std::vector<std::string_view> names = {"a:1", "b:1", "c:1", "d:1"};
  std::vector<std::string_view> reversed(names.rbegin(), names.rend());
  for (size_t i = 0; i < 1000; ++i) {
    std::string key = keyOf(i);
    size_t picked = pickByHash(eps, names, key);
    ASSERT_LT(picked, 4u);
    EXPECT_EQ(pickByHash(eps, names, key), picked);
    EXPECT_EQ(reversed[pickByHash(eps, reversed, key)], names[picked]);
  }
}

TEST_F(PickByHash, SpreadsOverThreeEndpoints) {
  std::vector<EndpointLoad> eps(3, up());
  std::vector<std::string_view> names = {"10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"};
  std::vector<size_t> counts(3, 0);
  for (size_t i = 0; i < 30000; ++i) ++counts[pickByHash(eps, names, keyOf(i))];
  for (size_t count : counts) expectNear(count, 10000, 0.05);
}

TEST_F(PickByHash, RemovingAnEndpointMovesOnlyItsKeys) {
  std::vector<std::string_view> names = {"a:1", "b:1", "c:1", "d:1"};
  std::vector<std::string_view> without_c = {"a:1", "b:1", "d:1"};  // positions shift
  std::vector<EndpointLoad> four(4, up());
  std::vector<EndpointLoad> three(3, up());
  std::vector<EndpointLoad> c_down = {up(), up(), down(), up()};
  std::vector<size_t> moved_to(4, 0);
  size_t on_c = 0;
  for (size_t i = 0; i < 20000; ++i) {
    std::string key = keyOf(i);
    std::string_view before = names[pickByHash(four, names, key)];
    std::string_view after = without_c[pickByHash(three, without_c, key)];
    std::string_view after_down = names[pickByHash(c_down, names, key)];
    EXPECT_EQ(after, after_down) << key;  // removed or unavailable: the same outcome
    if (before != "c:1") {
      ASSERT_EQ(after, before) << key;
    } else {
      ++on_c;
      ASSERT_NE(after, "c:1");
      for (size_t e = 0; e < 4; ++e) moved_to[e] += names[e] == after;
    }
  }
  // c's keys go to each survivor's fair share, not all to one neighbour.
  expectNear(on_c, 5000, 0.08);
  for (size_t e : {0, 1, 3}) expectNear(moved_to[e], on_c / 3.0, 0.12);
}

TEST_F(PickByHash, AddingAnEndpointTakesOnlyKeysItWins) {
  std::vector<std::string_view> names = {"a:1", "b:1", "c:1"};
  std::vector<std::string_view> more = {"a:1", "b:1", "c:1", "e:1"};
  std::vector<EndpointLoad> three(3, up());
  std::vector<EndpointLoad> four(4, up());
  size_t taken = 0;
  for (size_t i = 0; i < 20000; ++i) {
    std::string key = keyOf(i);
    std::string_view before = names[pickByHash(three, names, key)];
    std::string_view after = more[pickByHash(four, more, key)];
    if (after == "e:1") {
      ++taken;
    } else {
      ASSERT_EQ(after, before) << key;
    }
  }
  expectNear(taken, 5000, 0.08);
}

TEST_F(PickByHash, SpillOverTierOnlyWhileTierZeroIsUnavailable) {
  std::vector<std::string_view> names = {"remote-a", "local", "remote-b"};
  std::vector<EndpointLoad> eps = {up(1), up(0), up(1)};
  std::vector<size_t> counts(3, 0);
  for (size_t i = 0; i < 2000; ++i) ++counts[pickByHash(eps, names, keyOf(i))];
  EXPECT_EQ(counts, (std::vector<size_t>{0, 2000, 0}));
  eps[1].available = false;
  counts.assign(3, 0);
  for (size_t i = 0; i < 2000; ++i) ++counts[pickByHash(eps, names, keyOf(i))];
  EXPECT_EQ(counts[1], 0u);
  expectNear(counts[0], 1000, 0.1);
  expectNear(counts[2], 1000, 0.1);
}

TEST_F(PickByHash, NoEndpointWhenEmptyOrAllUnavailable) {
  std::vector<std::string_view> names = {"a", "b"};
  EXPECT_EQ(pickByHash({}, {}, "k"), kNoEndpoint);
  std::vector<EndpointLoad> all_down = {down(), down(1)};
  EXPECT_EQ(pickByHash(all_down, names, "k"), kNoEndpoint);
}

TEST_F(PickByHash, OnlyEndpointsWithAKeyAreConsidered) {
  std::vector<EndpointLoad> eps = {down(), up(), up()};
  std::vector<std::string_view> names = {"a", "b"};  // endpoint 2 has no key
  for (size_t i = 0; i < 200; ++i) EXPECT_EQ(pickByHash(eps, names, keyOf(i)), 1u);
  std::vector<std::string_view> none;
  EXPECT_EQ(pickByHash(eps, none, "k"), kNoEndpoint);
}

TEST_F(PickByHash, EmptyKeyIsAKeyLikeAnyOther) {
  std::vector<EndpointLoad> eps(3, up());
  std::vector<std::string_view> names = {"a", "b", "c"};
  size_t picked = pickByHash(eps, names, "");
  ASSERT_LT(picked, 3u);
  EXPECT_EQ(pickByHash(eps, names, ""), picked);
}

}  // namespace
}  // namespace infergate::routing
