#include "routing/affinity_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace infergate::routing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = AffinityTable::Clock;
using Counts = std::vector<std::pair<std::string, size_t>>;

// Synthetic time: no test reads the clock.
const Clock::time_point kStart = Clock::time_point() + std::chrono::hours(1);

TEST(AffinityTable, UnknownSequenceIsUnbound) {
  AffinityTable table(seconds(10));
  EXPECT_EQ(table.find("42", kStart), std::nullopt);
  EXPECT_EQ(table.size(), 0u);
}

TEST(AffinityTable, FindsTheBoundEndpoint) {
  AffinityTable table(seconds(10));
  table.bind("42", "10.0.0.1:8001", kStart);
  table.bind("43", "10.0.0.2:8001", kStart);
  EXPECT_EQ(table.find("42", kStart), "10.0.0.1:8001");
  EXPECT_EQ(table.find("43", kStart + seconds(1)), "10.0.0.2:8001");
  EXPECT_EQ(table.find("4", kStart), std::nullopt);
  EXPECT_EQ(table.size(), 2u);
}

TEST(AffinityTable, BindAgainRebinds) {
  AffinityTable table(seconds(10));
  table.bind("s", "a", kStart);
  table.bind("s", "b", kStart);
  EXPECT_EQ(table.find("s", kStart), "b");
  EXPECT_EQ(table.size(), 1u);
}

TEST(AffinityTable, EraseEndsTheSequence) {
  AffinityTable table(seconds(10));
  table.bind("s", "a", kStart);
  table.bind("t", "a", kStart);
  table.erase("s");
  table.erase("never-bound");
  EXPECT_EQ(table.find("s", kStart), std::nullopt);
  EXPECT_EQ(table.find("t", kStart), "a");
  EXPECT_EQ(table.size(), 1u);
}

TEST(AffinityTable, ExpiresOnlyPastTheIdleTimeout) {
  AffinityTable table(seconds(10));
  table.bind("s", "a", kStart);
  EXPECT_EQ(table.find("s", kStart + seconds(10)), "a");  // exactly the timeout: still bound
  // That find refreshed it: ten more seconds from there.
  EXPECT_EQ(table.find("s", kStart + seconds(20)), "a");
  EXPECT_EQ(table.find("s", kStart + seconds(30) + milliseconds(1)), std::nullopt);
  EXPECT_EQ(table.size(), 0u);  // the expired binding was erased by find()
}

TEST(AffinityTable, FindRefreshesTheLastUse) {
  AffinityTable table(seconds(10));
  table.bind("kept", "a", kStart);
  table.bind("idle", "a", kStart);
  for (int s = 5; s <= 30; s += 5) ASSERT_EQ(table.find("kept", kStart + seconds(s)), "a");
  EXPECT_EQ(table.find("idle", kStart + seconds(30)), std::nullopt);
  EXPECT_EQ(table.find("kept", kStart + seconds(40)), "a");
}

TEST(AffinityTable, AnOlderNowDoesNotMoveTheLastUseBack) {
  // Threads pass their own `now`; one that read the clock earlier must not shorten the
  // binding another thread just refreshed.
  AffinityTable table(seconds(10));
  table.bind("s", "a", kStart + seconds(20));
  EXPECT_EQ(table.find("s", kStart), "a");
  table.bind("s", "a", kStart + seconds(1));
  EXPECT_EQ(table.find("s", kStart + seconds(29)), "a");
}

TEST(AffinityTable, SweepDropsOnlyIdleBindings) {
  AffinityTable table(seconds(10));
  for (int i = 0; i < 100; ++i) table.bind("old-" + std::to_string(i), "a", kStart);
  for (int i = 0; i < 50; ++i) table.bind("new-" + std::to_string(i), "b", kStart + seconds(8));
  EXPECT_EQ(table.sweep(kStart + seconds(10)), 0u);
  EXPECT_EQ(table.sweep(kStart + seconds(11)), 100u);
  EXPECT_EQ(table.size(), 50u);
  EXPECT_EQ(table.find("new-7", kStart + seconds(11)), "b");
  EXPECT_EQ(table.find("old-7", kStart + seconds(11)), std::nullopt);
  EXPECT_EQ(table.sweep(kStart + seconds(11)), 0u);
}

TEST(AffinityTable, SetIdleTimeoutAppliesToExistingBindings) {
  AffinityTable table(seconds(10));
  table.bind("s", "a", kStart);
  table.bind("t", "a", kStart);
  table.setIdleTimeout(seconds(2));
  EXPECT_EQ(table.find("s", kStart + seconds(3)), std::nullopt);
  table.setIdleTimeout(seconds(60));
  EXPECT_EQ(table.find("t", kStart + seconds(30)), "a");
}

TEST(AffinityTable, EraseEndpointDropsItsBindingsOnly) {
  AffinityTable table(seconds(10));
  for (int i = 0; i < 40; ++i) {
    table.bind("seq-" + std::to_string(i), i % 4 == 0 ? "gone:1" : "stays:1", kStart);
  }
  EXPECT_EQ(table.eraseEndpoint("gone:1"), 10u);
  EXPECT_EQ(table.eraseEndpoint("gone:1"), 0u);
  EXPECT_EQ(table.eraseEndpoint("gone"), 0u);  // a prefix of a key is another key
  EXPECT_EQ(table.size(), 30u);
  EXPECT_EQ(table.find("seq-0", kStart), std::nullopt);
  EXPECT_EQ(table.find("seq-1", kStart), "stays:1");
}

TEST(AffinityTable, CountsByEndpointSortedByKey) {
  AffinityTable table(seconds(10));
  EXPECT_EQ(table.countsByEndpoint(), Counts{});
  for (int i = 0; i < 7; ++i) table.bind("x" + std::to_string(i), "b:1", kStart);
  for (int i = 0; i < 3; ++i) table.bind("y" + std::to_string(i), "a:1", kStart);
  table.bind("z", "c:1", kStart);
  EXPECT_EQ(table.countsByEndpoint(), (Counts{{"a:1", 3}, {"b:1", 7}, {"c:1", 1}}));
  table.bind("z", "a:1", kStart);  // rebinding moves the count
  EXPECT_EQ(table.countsByEndpoint(), (Counts{{"a:1", 4}, {"b:1", 7}}));
}

TEST(AffinityTable, SequenceIdsAreBytes) {
  // Ids come from clients as strings or integers rendered as text; any bytes work.
  AffinityTable table(seconds(10));
  std::string with_nul("a\0b", 3);
  table.bind(with_nul, "x", kStart);
  table.bind("a", "y", kStart);
  table.bind("", "z", kStart);
  EXPECT_EQ(table.find(with_nul, kStart), "x");
  EXPECT_EQ(table.find("a", kStart), "y");
  EXPECT_EQ(table.find("", kStart), "z");
}

TEST(AffinityTable, ConcurrentUseFromFourThreads) {
  // Each thread binds, finds and erases its own sequences and touches shared ones, while
  // one also sweeps and counts: the table must stay consistent (and ASan quiet).
  AffinityTable table(seconds(10));
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string endpoint = "ep-" + std::to_string(t);
      for (int i = 0; i < kRounds; ++i) {
        std::string own = "t" + std::to_string(t) + "-" + std::to_string(i);
        Clock::time_point now = kStart + milliseconds(i);
        table.bind(own, endpoint, now);
        if (table.find(own, now) != endpoint) ++mismatches[t];
        if (i % 2 == 0) table.erase(own);
        std::string shared = "shared-" + std::to_string(i % 16);
        table.bind(shared, endpoint, now);
        (void)table.find(shared, now);
        if (t == 0 && i % 100 == 0) {
          (void)table.sweep(now);
          (void)table.countsByEndpoint();
          (void)table.size();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
  // Odd rounds of each thread remain, plus the 16 shared ids; nothing was idle 10 s.
  EXPECT_EQ(table.size(), 4u * kRounds / 2 + 16);
  size_t total = 0;
  for (const auto& [endpoint, count] : table.countsByEndpoint()) total += count;
  EXPECT_EQ(total, table.size());
  EXPECT_EQ(table.sweep(kStart + seconds(60)), 4u * kRounds / 2 + 16);
}

}  // namespace
}  // namespace infergate::routing
